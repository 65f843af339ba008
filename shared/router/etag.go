package router

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Entity tags of table answers (load, create, register, commit). A tag is
// derived from everything the answer depends on: the metadata location
// (the metadata file never changes once written), the snapshots mode (refs
// and all are different bodies of one version), and the credentials the
// answer carries: none, or vended ones with their expiry. A vended tag
// carries the expiry in clear beside the hash that covers it, so that a
// revalidation can tell from the tag alone whether the client's
// credentials still have long enough to live: a 304 never outlives them.
// Peers that keyed the tag on the metadata location alone handed out
// expired credentials with a 304 and shared one tag between refs and all.

// tagVersion changes when what a tag covers changes: old tags then miss.
const tagVersion = "t1"

// revalidateMargin: a vended tag revalidates only while its credentials
// have at least this long to live, the refresh buffer iceberg-go and the
// Java client use (5 minutes before expiry).
const revalidateMargin = 5 * time.Minute

// tableTag is the ETag of a table answer. expires is the vended
// credentials' expiry, zero for an answer without credentials.
func tableTag(metadataLocation, snapshots string, expires time.Time) string {
	if snapshots == "" {
		snapshots = "all"
	}
	delegation, exp := "none", ""
	if !expires.IsZero() {
		delegation, exp = "vended", strconv.FormatInt(expires.UnixMilli(), 10)
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{tagVersion, metadataLocation, snapshots, delegation, exp}, "\x00")))
	h := base64.RawURLEncoding.EncodeToString(sum[:18])
	if exp != "" {
		h += "." + exp
	}
	return `W/"` + h + `"`
}

// revalidates reports whether an If-None-Match header names the tag the
// answer would carry now, from the table's metadata location alone (no
// metadata read, no credentials vended). vended: the answer would carry
// credentials; their expiry is read from the client's tag and must be at
// least revalidateMargin away. It returns the matched tag.
func revalidates(header, metadataLocation, snapshots string, vended bool, now time.Time) (string, bool) {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		// Weak comparison (RFC 9110 §13.1.2): W/ is ignored; "*" never
		// matches, since a client sending it holds no tag (nor credentials).
		opaque := strings.Trim(strings.TrimPrefix(t, "W/"), `"`)
		var expires time.Time
		if vended {
			_, exp, ok := strings.Cut(opaque, ".")
			ms, err := strconv.ParseInt(exp, 10, 64)
			if !ok || err != nil {
				continue
			}
			if expires = time.UnixMilli(ms); expires.Sub(now) < revalidateMargin {
				continue
			}
		}
		if want := tableTag(metadataLocation, snapshots, expires); strings.Trim(strings.TrimPrefix(want, "W/"), `"`) == opaque {
			return want, true
		}
	}
	return "", false
}

// notModified answers 304 with the tag and no body.
func notModified(w http.ResponseWriter, tag string) {
	w.Header().Set("ETag", tag)
	w.WriteHeader(http.StatusNotModified)
}
