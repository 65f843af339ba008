package sim

import (
	"hash/fnv"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/router"
)

// Two execution environments. In AWS every Lambda execution environment
// keeps its own cached reading of a catalog's grants (shared/authz), and a
// grant change made in one counts in the others within authz.TTL: they
// learn of it from the catalog's grant index version. The simulation's
// server is one process, so a share of the Iceberg REST requests is served
// by a second router over the same services with its own authorizer, whose
// clock moves past the TTL between any two of its readings: every request
// it serves comes "later than TTL" after the change before it, so it must
// answer exactly as the model says, as the process that made the change
// does. Grant changes (the lifecycle API) stay in the first environment,
// whose own changes count at once.

// secondEnv builds the second environment's handler from the server's
// router configuration.
func secondEnv(srv *server.Server) http.Handler {
	cfg := srv.RouterConfig
	az := authz.New(srv.Catalog.Store(), []string{server.AdminPrincipal, server.LocalAccountAdmins})
	var n atomic.Int64
	az.SetClock(func() time.Time {
		return time.Now().Add(time.Duration(n.Add(1)) * (authz.TTL + time.Second))
	})
	cfg.Authz = az
	return router.New(cfg)
}

// environments serves a request in the second environment when it is an
// Iceberg REST request with a bearer token and its method, path and
// token hash to it (about a third: a seed's choice does not depend on
// the order requests arrive in); the rest in first.
func (w *World) environments(first http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		second := w.env2.Load()
		auth := r.Header.Get("Authorization")
		if second == nil || !strings.HasPrefix(r.URL.Path, "/v1/") || !strings.HasPrefix(auth, "Bearer ") {
			first.ServeHTTP(rw, r)
			return
		}
		h := fnv.New32a()
		h.Write([]byte(r.Method + " " + r.URL.RequestURI() + " " + auth))
		if h.Sum32()%3 != 0 {
			first.ServeHTTP(rw, r)
			return
		}
		(*second).ServeHTTP(rw, r)
	})
}
