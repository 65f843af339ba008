package router

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Vended credentials (the spec's X-Iceberg-Access-Delegation:
// vended-credentials, storage-credentials and loadCredentials): the
// catalog's vended-credentials property says whether engines may have them
// (allowed: when they ask) or must (required: every table answer carries
// them); the session reads and writes the table's own location, reads the
// old locations it still owns, and deletes nothing (shared/credentials).

const delegationHeader = "X-Iceberg-Access-Delegation"

// errNoVending: credentials asked of a catalog or deployment that vends none.
var errNoVending = errors.New("vended credentials unavailable")

// asks reports whether the request asks for vended credentials (the
// header is a comma-separated list of mechanisms).
func asks(r *http.Request) bool {
	for _, h := range r.Header.Values(delegationHeader) {
		for _, m := range strings.Split(h, ",") {
			if strings.TrimSpace(m) == "vended-credentials" {
				return true
			}
		}
	}
	return false
}

// vends decides whether a table answer carries credentials: the catalog
// allows it and the client asks, or the catalog requires it.
func (s *server) vends(r *http.Request) (bool, error) {
	cat := catalogInfo(r)
	switch catalog.Vending(cat.Properties) {
	case catalog.VendingRequired:
	case catalog.VendingAllowed:
		if !asks(r) {
			return false, nil
		}
	default:
		return false, nil
	}
	if s.Vendor == nil {
		if catalog.Vending(cat.Properties) == catalog.VendingRequired {
			return false, fmt.Errorf("%w: catalog %s requires vended credentials and this deployment has no vending role", errNoVending, cat.Name)
		}
		return false, nil
	}
	return true, nil
}

// mayWrite: the caller holds TABLE_WRITE (its credentials then write).
func (s *server) mayWrite(r *http.Request) bool {
	return s.Authz.Check(r.Context(), catalogInfo(r).Name, authz.TableWrite) == nil
}

// writes: a session vended to the caller for the table may write: the
// caller holds TABLE_WRITE and no legal hold covers the table, neither its
// own nor one of its namespaces' or its catalog's (SPEC §2: a legal-held
// table's sessions are read-only, whoever asks). A namespace that cannot
// be read counts as held: the answer errs on the side of reading.
func (s *server) writes(r *http.Request, e store.TableEntry) bool {
	if !s.mayWrite(r) {
		return false
	}
	held, _ := s.Catalog.Held(r.Context(), catalogInfo(r).Name, e.Namespace, e.LegalHold)
	return !held
}

// vendsWrite: credentials vended now for the table would write (a location
// of its own and writes allowed); what a vended tag says of its credentials
// (revalidates).
func (s *server) vendsWrite(r *http.Request, e store.TableEntry) bool {
	return e.Hold != nil && e.Hold.Prefix != "" && s.writes(r, e)
}

// vend assumes a session for the caller on the table's owned prefixes. nil
// (and no error) when the table owns none it can be scoped to, or its
// location makes a session policy STS refuses, unless the catalog requires
// credentials: the client then uses what it has (the engine policy).
func (s *server) vend(r *http.Request, e store.TableEntry) (*credentials.Vended, error) {
	cat := catalogInfo(r)
	required := catalog.Vending(cat.Properties) == catalog.VendingRequired
	var scope credentials.Scope
	write := s.vendsWrite(r, e)
	for i, h := range e.Holds() {
		l := objects.Location{Bucket: h.Bucket, Key: h.Prefix}
		if h.Prefix == "" {
			continue // never the whole bucket
		}
		if i == 0 && write {
			scope.Write = append(scope.Write, l)
		} else {
			scope.Read = append(scope.Read, l)
		}
	}
	if len(scope.Write)+len(scope.Read) == 0 {
		if required {
			return nil, fmt.Errorf("%w: table %s owns no location to scope credentials to", errNoVending, strings.Join(append(e.Namespace, e.Name), "."))
		}
		return nil, nil
	}
	d, err := catalog.VendingDuration(cat.Properties)
	if err != nil {
		d = credentials.DefaultDuration // a value stored before the check
	}
	v, err := s.Vendor.Vend(r.Context(), scope, credentials.SessionName(e.TableUUID, authz.Principal(r.Context())), d)
	if errors.Is(err, credentials.ErrTooLong) && !required {
		slog.Info("no vended credentials", "table", e.Name, "reason", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// storageCredentials is the spec's storage-credentials list: one entry,
// since one session covers every prefix the table owns, and Iceberg Java's
// VendedCredentialsProvider refuses a refresh answer with more than one S3
// credential. A table that owns several prefixes (moved while snapshots
// reach its old one) gets their common prefix (cut at a "/"): the session
// policy, not the prefix, is what scopes the keys. The prefix is spelt in
// the scheme of the table's metadata location (s3a://, s3n://: what its
// engines write into its paths), or clients match no file to it.
func storageCredentials(v *credentials.Vended, metadataLocation string) []map[string]any {
	prefix := commonPrefix(v.Prefixes)
	if scheme, _, ok := strings.Cut(metadataLocation, "://"); ok && (scheme == "s3a" || scheme == "s3n") {
		if rest, ok := strings.CutPrefix(prefix, "s3://"); ok {
			prefix = scheme + "://" + rest
		}
	}
	return []map[string]any{{"prefix": prefix, "config": v.Config}}
}

// commonPrefix is the longest prefix of every location, cut after a "/"
// when they differ (at worst the scheme, "s3://").
func commonPrefix(locs []string) string {
	if len(locs) == 0 {
		return ""
	}
	p := locs[0]
	for _, l := range locs[1:] {
		n := 0
		for n < len(p) && n < len(l) && p[n] == l[n] {
			n++
		}
		if n < len(p) || n < len(l) {
			p = p[:strings.LastIndex(p[:n], "/")+1]
		}
	}
	return p
}

// refreshKey is the config key naming the credentials endpoint, relative
// to the catalog URI: Iceberg Java's S3FileIO refreshes vended credentials
// through it (AwsClientProperties), iceberg-go finds the endpoint itself.
const refreshKey = "client.refresh-credentials-endpoint"

// tablePath is a table's REST path relative to the catalog URI, escaped as
// clients escape it (namespace levels joined by 0x1F).
func tablePath(cat string, ns []string, name string) string {
	return "v1/" + url.PathEscape(cat) + "/namespaces/" + url.PathEscape(strings.Join(ns, "\x1f")) + "/tables/" + url.PathEscape(name)
}

// staticKeys are the client defaults that hand out the deployment's own S3
// keys (locally, the embedded S3's): a catalog that requires vended
// credentials gives engines no other keys.
var staticKeys = []string{"s3.access-key-id", "s3.secret-access-key", "s3.session-token"}

// clientConfig is the config of a table answer or /v1/config's defaults.
func (s *server) clientConfig(r *http.Request) map[string]string {
	out := maps.Clone(s.ClientDefaults)
	if out == nil {
		out = map[string]string{}
	}
	if catalog.Vending(catalogInfo(r).Properties) == catalog.VendingRequired {
		for _, k := range staticKeys {
			delete(out, k)
		}
	} else if s.ClientKeys != nil {
		maps.Copy(out, s.ClientKeys(r.Context()))
	}
	return out
}

// loadCredentials answers GET …/tables/{t}/credentials: a fresh session for
// the table (engines refresh before expiry), when the catalog vends any.
func (s *server) loadCredentials(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	if catalog.Vending(catalogInfo(r).Properties) == catalog.VendingOff {
		writeError(w, fmt.Errorf("%w: catalog %s vends no credentials (%s is off)", errNoVending, cat, catalog.PropVending))
		return
	}
	if s.Vendor == nil {
		writeError(w, fmt.Errorf("%w: this deployment has no vending role", errNoVending))
		return
	}
	e, err := s.Catalog.Entry(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	v, err := s.vend(r, e)
	if err == nil && v == nil {
		err = fmt.Errorf("%w: table %s: no session policy can be scoped to its location", errNoVending, id)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"storage-credentials": storageCredentials(v, e.MetadataLocation)})
}

// noStore marks an answer whose config carries secrets (vended sessions,
// or the deployment's own S3 keys) as not to be kept by any cache.
func noStore(w http.ResponseWriter, config map[string]string) {
	if config["s3.secret-access-key"] != "" {
		w.Header().Set("Cache-Control", "no-store")
	}
}
