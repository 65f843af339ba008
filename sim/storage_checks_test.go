package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Storage checks (docs/design/simulation.md, "What the held-out set
// taught"). The warehouse bucket keeps versions, as a deployed one does
// (SPEC §2: the bucket enforces the lifecycle): a DeleteObjects by key only
// adds a delete marker, and the bytes stay as a noncurrent version. What
// icehold deletes (a purge's prefix, an expire job's files, the orphan
// sweep's) must leave nothing, versions and delete markers included; a
// listing of current objects cannot tell, so at rest the versions are
// listed.

// versionBucket turns the warehouse bucket's versioning on (once, before
// the first table).
func (w *World) versionBucket(ctx context.Context) error {
	_, err := w.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
	if err != nil {
		return fmt.Errorf("turn the warehouse's versioning on: %w", err)
	}
	return nil
}

// versions lists every key of the warehouse with how many versions and
// delete markers it keeps (page by page: a bulk table alone passes 1,000).
func (w *World) versions(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)}
	for {
		page, err := w.s3.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list the warehouse's versions: %w", err)
		}
		for _, v := range page.Versions {
			out[aws.ToString(v.Key)]++
		}
		for _, m := range page.DeleteMarkers {
			out[aws.ToString(m.Key)]++
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// checkNothingDeletedLeft: at rest, every key the versions listing names
// still has a current object. Nothing but icehold deletes in the warehouse
// (a session's delete is refused), and every icehold delete leaves nothing:
// a key whose only remains are noncurrent versions or delete markers is a
// delete that left its bytes (a purge SUCCEEDED yet its prefix keeps them,
// an expire job's or the orphan sweep's file still recoverable). Prefixes
// left by design (tables released without purge, purges FAILED under an
// injected fault, old locations) are not held to it.
func (s *Sim) checkNothingDeletedLeft() error {
	vers, err := s.w.versions(s.ctx)
	if err != nil {
		return err
	}
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	var left []string
	for k, n := range vers {
		if _, ok := objs[k]; ok || s.leftByDesign(k) {
			continue
		}
		left = append(left, fmt.Sprintf("%s (%d versions and markers)", k, n))
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	var whose []string
	for _, l := range left[:min(3, len(left))] {
		for _, g := range s.m.gens {
			if p, ok := keyOf(strings.TrimRight(g.location, "/")); ok && strings.HasPrefix(l, p+"/") {
				whose = append(whose, fmt.Sprintf("%s is under %s (%s)", strings.Fields(l)[0], g, g.state))
			}
		}
	}
	return s.violatef("%d deleted keys keep versions or delete markers at rest (every icehold delete leaves nothing, SPEC §2), e.g. %s\n%s",
		len(left), strings.Join(left[:min(3, len(left))], ", "), strings.Join(whose, "\n"))
}
