package router

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/credentials"
)

// Entity tags of table answers (load, create, register, commit). A tag is
// derived from everything the answer depends on: the table's path (a
// renamed table's answer names another refresh endpoint), the metadata
// location (the metadata file never changes once written), the snapshots mode (refs
// and all are different bodies of one version), and the credentials the
// answer carries: none, or vended ones with their expiry. A vended tag
// carries the expiry in clear beside the hash that covers it, so that a
// revalidation can tell from the tag alone whether the client's
// credentials still have long enough to live: a 304 never outlives them.
// Peers that keyed the tag on the metadata location alone handed out
// expired credentials with a 304 and shared one tag between refs and all.

// tagVersion changes when what a tag covers changes: old tags then miss.
const tagVersion = "t2"

// revalidateMargin: a vended tag revalidates only while its credentials
// have at least this long to live, the refresh buffer iceberg-go and the
// Java client use (5 minutes before expiry).
const revalidateMargin = 5 * time.Minute

// tagCreds is what a tag says of an answer's credentials: none (zero),
// or vended ones with their expiry and whether they write.
type tagCreds struct {
	expires time.Time
	write   bool
}

func tagOf(v *credentials.Vended) tagCreds {
	if v == nil {
		return tagCreds{}
	}
	return tagCreds{v.Expires, v.Write}
}

// tableTag is the ETag of a table answer; path is the table's (tablePath).
func tableTag(path, metadataLocation, snapshots string, c tagCreds) string {
	if snapshots == "" {
		snapshots = "all"
	}
	delegation, exp := "none", ""
	if !c.expires.IsZero() {
		delegation, exp = "vended-r", strconv.FormatInt(c.expires.UnixMilli(), 10)+".r"
		if c.write {
			delegation, exp = "vended-w", strconv.FormatInt(c.expires.UnixMilli(), 10)+".w"
		}
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{tagVersion, path, metadataLocation, snapshots, delegation, exp}, "\x00")))
	h := base64.RawURLEncoding.EncodeToString(sum[:18])
	if exp != "" {
		h += "." + exp
	}
	return `W/"` + h + `"`
}

// revalidates reports whether an If-None-Match header names the tag the
// answer would carry now, from the table's metadata location alone (no
// metadata read, no credentials vended). vended: the answer would carry
// credentials; their expiry and scope are read from the client's tag, the
// expiry must be at least revalidateMargin away, and the tag revalidates
// only while writes (whether credentials vended now would write) says
// what it says: a reader granted TABLE_WRITE, or a writer revoked, gets
// new credentials rather than a 304 that keeps the old ones. It returns
// the matched tag.
func revalidates(header, path, metadataLocation, snapshots string, vended bool, writes func() bool, now time.Time) (string, bool) {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		// Weak comparison (RFC 9110 §13.1.2): W/ is ignored; "*" never
		// matches, since a client sending it holds no tag (nor credentials).
		opaque := strings.Trim(strings.TrimPrefix(t, "W/"), `"`)
		var c tagCreds
		if vended {
			parts := strings.Split(opaque, ".")
			if len(parts) != 3 {
				continue
			}
			ms, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				continue
			}
			c = tagCreds{time.UnixMilli(ms), parts[2] == "w"}
			if c.expires.Sub(now) < revalidateMargin {
				continue
			}
		}
		want := tableTag(path, metadataLocation, snapshots, c)
		if strings.Trim(strings.TrimPrefix(want, "W/"), `"`) != opaque {
			continue
		}
		if vended && c.write != writes() {
			continue
		}
		return want, true
	}
	return "", false
}

// notModified answers 304 with the tag and no body.
func notModified(w http.ResponseWriter, tag string) {
	w.Header().Set("ETag", tag)
	w.WriteHeader(http.StatusNotModified)
}
