package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A TablePermanentlyDeleted event's detail says "purge": true exactly when a
// job takes the files: a consumer acts on that flag. Defect: a drop with
// purge said nothing, and a purge-now (which always purges) must say true
// whatever the record's purge-on-expiry.
func TestPermanentlyDeletedSaysPurge(t *testing.T) {
	localOnly(t)
	purgeFlag := func(t *testing.T, uuid string) (any, bool) {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(localOnly(t).Info.StateDir, "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var e struct {
				Type   string `json:"detail-type"`
				Detail struct {
					TableUUID string         `json:"table-uuid"`
					JobID     string         `json:"job-id"`
					Detail    map[string]any `json:"detail"`
				} `json:"detail"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Type == "TablePermanentlyDeleted" && e.Detail.TableUUID == uuid {
				return e.Detail.Detail["purge"], e.Detail.JobID != "" || e.Detail.Detail["job-id"] != nil
			}
		}
		return nil, false
	}
	create := func(t *testing.T, cat, ns string) (string, string) {
		mustCall(t, 200, "POST", "/v1/"+cat+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
		out := mustCall(t, 200, "POST", "/v1/"+cat+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{"name": "e", "schema": rawSchema})
		var res struct {
			Metadata struct {
				UUID string `json:"table-uuid"`
			} `json:"metadata"`
		}
		mustDecode(t, out, &res)
		return "/v1/" + cat + "/namespaces/" + ns + "/tables/e", res.Metadata.UUID
	}
	cases := []struct {
		name string
		end  func(t *testing.T) string // the table's uuid
	}{
		{"drop with purge", func(t *testing.T) string {
			path, uuid := create(t, shared.Catalog, uniq("pe"))
			mustCall(t, 204, "DELETE", path+"?purgeRequested=true", shared.Token, nil)
			return uuid
		}},
		{"purge-now, purge-on-expiry false", func(t *testing.T) string {
			cat, _ := softCatalog(t, map[string]string{"soft-delete.purge-on-expiry": "false"})
			ns := uniq("pn")
			path, uuid := create(t, cat, ns)
			mustCall(t, 204, "DELETE", path, shared.Token, nil)
			mustCall(t, 202, "POST", lifecycleTablePath(cat, ns, "e")+"/purge-now", shared.Token, map[string]any{})
			return uuid
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uuid := c.end(t)
			var flag any
			var job bool
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if flag, job = purgeFlag(t, uuid); flag != nil {
					break
				}
			}
			if flag != true || !job {
				t.Errorf("TablePermanentlyDeleted of %s: purge %v, a job named %v; want purge true beside its job", uuid, flag, job)
			}
		})
	}
}
