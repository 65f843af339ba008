package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/router"
)

// A drop with purge answers 204 (what Iceberg clients expect) and names its
// job in Location and Icehold-Purge-Job; a replay under the same
// Idempotency-Key names the same job; purge-now names its job the same way.
func TestPurgeRequestsNameTheirJob(t *testing.T) {
	ns := newNamespace(t, "handle")
	tables := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables"
	for _, name := range []string{"a", "b"} {
		mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": name, "schema": rawSchema})
	}
	cases := []struct {
		name, table string
		headers     []string
	}{
		{"plain", "a", nil},
		{"with an Idempotency-Key", "b", []string{"Idempotency-Key", uniq("k")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := tables + "/" + c.table + "?purgeRequested=true"
			status, h, body := callHeaders(t, "DELETE", path, shared.Token, nil, c.headers...)
			if status != 204 || len(body) != 0 {
				t.Fatalf("drop with purge: %d %s, want 204 without a body", status, body)
			}
			id := h.Get(router.PurgeJobHeader)
			if id == "" || h.Get("Location") != "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs/"+id {
				t.Fatalf("drop with purge: %s %q, Location %q", router.PurgeJobHeader, id, h.Get("Location"))
			}
			var j jobJSON
			mustDecode(t, mustCall(t, 200, "GET", h.Get("Location"), shared.Token, nil), &j)
			if j.ID != id || j.Table != c.table {
				t.Errorf("Location answers job %+v, want %s of table %s", j, id, c.table)
			}
			if c.headers == nil {
				return
			}
			status, again, _ := callHeaders(t, "DELETE", path, shared.Token, nil, c.headers...)
			if status != 204 || again.Get(router.PurgeJobHeader) != id || again.Get("Location") != h.Get("Location") || again.Get("Idempotent-Replayed") != "true" {
				t.Errorf("replay: %d %v, want the same job's headers", status, again)
			}
		})
	}

	t.Run("purge-now", func(t *testing.T) {
		localOnly(t)
		name, cat := softCatalog(t, nil)
		sns := uniq("now")
		if err := cat.CreateNamespace(context.Background(), table.Identifier{sns}, nil); err != nil {
			t.Fatal(err)
		}
		mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+sns+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
		mustCall(t, 204, "DELETE", "/v1/"+name+"/namespaces/"+sns+"/tables/t", shared.Token, nil)
		status, h, body := callHeaders(t, "POST", lifecycleTablePath(name, sns, "t")+"/purge-now", shared.Token, nil)
		var j jobJSON
		if status != 202 || json.Unmarshal(body, &j) != nil || h.Get(router.PurgeJobHeader) != j.ID ||
			h.Get("Location") != "/lifecycle/v1/catalogs/"+name+"/purge-jobs/"+j.ID {
			t.Errorf("purge-now: %d %s, headers %v", status, body, h)
		}
	})
}

// Without credentials, with a token nobody holds, and with another scheme,
// the 401 says which; the OAuth2 token endpoint answers in RFC 6749's error
// shape, so an OAuth2 client (iceberg-go's rest.WithCredential) shows why.
func TestAuthenticationMessages(t *testing.T) {
	localOnly(t)
	cases := []struct {
		name, authorization, want string
	}{
		{"no credentials", "", "no credentials"},
		{"unknown token", "Bearer ih_00000000000000000000000000000000", "unknown token"},
		{"another scheme", "Basic dXNlcjpwYXNz", `scheme "Basic"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hs []string
			if c.authorization != "" {
				hs = []string{"Authorization", c.authorization}
			}
			req, _ := http.NewRequest("GET", shared.URL+"/v1/config?warehouse="+shared.Catalog, nil)
			for i := 0; i+1 < len(hs); i += 2 {
				req.Header.Set(hs[i], hs[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			typ, code, msg := errorModel(t, body)
			if res.StatusCode != 401 || code != 401 || typ != "NotAuthorizedException" || !strings.Contains(msg, c.want) {
				t.Errorf("%d %s %q, want 401 saying %q", res.StatusCode, typ, msg, c.want)
			}
		})
	}

	t.Run("oauth token endpoint", func(t *testing.T) {
		res, err := http.PostForm(shared.URL+"/v1/oauth/tokens", map[string][]string{
			"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"secret"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil || res.StatusCode != 401 || e.Error != "invalid_client" ||
			!strings.Contains(e.Description, "does not offer") {
			t.Errorf("token endpoint: %d %+v (%v), want 401 invalid_client saying it is not offered", res.StatusCode, e, err)
		}
	})

	t.Run("iceberg-go with a credential", func(t *testing.T) {
		_, err := rest.NewCatalog(context.Background(), "icehold", shared.URL,
			rest.WithCredential("id:secret"), rest.WithWarehouseLocation(shared.Catalog))
		if err == nil || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), "does not offer") {
			t.Errorf("rest.WithCredential: %v, want the reason the token endpoint gave", err)
		}
	})
}
