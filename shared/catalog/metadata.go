package catalog

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/objects"
)

// ErrBadMetadata: a metadata file that cannot be read as Iceberg metadata.
var ErrBadMetadata = errors.New("unreadable table metadata")

func jsonOf(meta table.Metadata) ([]byte, error) {
	raw, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return raw, nil
}

// maxMetadataBytes bounds what icehold will read as one metadata file.
const maxMetadataBytes = 512 << 20

// ReadMetadata reads and parses a metadata file.
func (s *Service) ReadMetadata(ctx context.Context, loc string) (table.Metadata, error) {
	meta, _, err := s.readMetadata(ctx, loc)
	return meta, err
}

// readMetadata reads and parses a metadata file (plain or gzip-compressed),
// returning the parsed metadata and the JSON as stored.
func (s *Service) readMetadata(ctx context.Context, loc string) (table.Metadata, []byte, error) {
	raw, err := s.objects.Get(ctx, loc)
	if err != nil {
		return nil, nil, err
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, maxMetadataBytes)); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
		}
	}
	meta, err := table.ParseMetadataBytes(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
	}
	return meta, raw, nil
}

// writeMetadata writes a new metadata file next to the table's others and
// returns its location and JSON. Files are never overwritten.
func (s *Service) writeMetadata(ctx context.Context, meta table.Metadata, previous string) (string, []byte, error) {
	raw, err := jsonOf(meta)
	if err != nil {
		return "", nil, err
	}
	loc := fmt.Sprintf("%s/metadata/%05d-%s.metadata.json",
		strings.TrimRight(meta.Location(), "/"), nextVersion(previous), uuid.NewString())
	if err := s.objects.PutNew(ctx, loc, raw, "application/json"); err != nil {
		if errors.Is(err, objects.ErrBadURI) {
			return "", nil, fmt.Errorf("%w: table location %q: %v", ErrBadRequest, meta.Location(), err)
		}
		return "", nil, err
	}
	return loc, raw, nil
}

// nextVersion derives the next metadata version from the current file name
// (00003-<uuid>.metadata.json → 4), as Iceberg's own catalogs do.
func nextVersion(previous string) int {
	if previous == "" {
		return 0
	}
	base := path.Base(previous)
	if i := strings.IndexByte(base, '-'); i > 0 {
		if n, err := strconv.Atoi(base[:i]); err == nil {
			return n + 1
		}
	}
	return 1
}

// refsOnly keeps in a metadata JSON only the snapshots that a branch or tag
// points at (the REST spec's snapshots=refs), leaving everything else as is.
func refsOnly(raw []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var refs map[string]struct {
		SnapshotID int64 `json:"snapshot-id"`
	}
	if r, ok := doc["refs"]; ok {
		if err := json.Unmarshal(r, &refs); err != nil {
			return nil, err
		}
	}
	keep := map[int64]bool{}
	for _, r := range refs {
		keep[r.SnapshotID] = true
	}
	var snaps []json.RawMessage
	if sn, ok := doc["snapshots"]; ok {
		if err := json.Unmarshal(sn, &snaps); err != nil {
			return nil, err
		}
	}
	kept := make([]json.RawMessage, 0, len(keep))
	for _, sn := range snaps {
		var id struct {
			SnapshotID int64 `json:"snapshot-id"`
		}
		if err := json.Unmarshal(sn, &id); err != nil {
			return nil, err
		}
		if keep[id.SnapshotID] {
			kept = append(kept, sn)
		}
	}
	if doc["snapshots"], _ = json.Marshal(kept); doc["snapshots"] == nil {
		return nil, errors.New("encode snapshots")
	}
	return json.Marshal(doc)
}
