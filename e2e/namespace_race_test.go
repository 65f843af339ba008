package e2e

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// Defect: a namespace drop checked emptiness, then deleted, in two steps, so
// a table created (or renamed in) between them outlived its namespace. The
// namespace now counts its children and its delete is conditioned on zero:
// in every race exactly one side wins and the loser gets a clean 4xx.
func TestNamespaceDropNeverRacesAChild(t *testing.T) {
	c := shared.Catalog
	home := newNamespace(t, "home")
	// expect is mustCall for the race workers: t.Fatal may not leave them.
	expect := func(t *testing.T, want int, method, path string, body any) []byte {
		status, out := call(t, method, path, shared.Token, body)
		if status != want {
			t.Errorf("%s %s: status %d, want %d: %s", method, path, status, want, out)
		}
		return out
	}
	cases := []struct {
		name    string
		races   int
		prepare func(t *testing.T, i int)
		child   func(t *testing.T, ns string, i int) (int, []byte)
		won     int // the child's status when it won
	}{
		{"create table", 200, nil, func(t *testing.T, ns string, i int) (int, []byte) {
			return call(t, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", shared.Token, `{"name":"t","schema":`+schemaJSON+`}`)
		}, 200},
		{"rename into", 200, func(t *testing.T, i int) {
			expect(t, 200, "POST", "/v1/"+c+"/namespaces/"+home+"/tables", fmt.Sprintf(`{"name":"r%d","schema":%s}`, i, schemaJSON))
		}, func(t *testing.T, ns string, i int) (int, []byte) {
			return call(t, "POST", "/v1/"+c+"/tables/rename", shared.Token, map[string]any{
				"source":      map[string]any{"namespace": []string{home}, "name": fmt.Sprintf("r%d", i)},
				"destination": map[string]any{"namespace": []string{ns}, "name": "t"},
			})
		}, 204},
		{"create child namespace", 20, nil, func(t *testing.T, ns string, i int) (int, []byte) {
			return call(t, "POST", "/v1/"+c+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns, "kid"}})
		}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var childWins, dropWins atomic.Int32
			race := func(i int) {
				ns := uniq("nsrace")
				expect(t, 200, "POST", "/v1/"+c+"/namespaces", map[string]any{"namespace": []string{ns}})
				if tc.prepare != nil {
					tc.prepare(t, i)
				}
				var (
					wg                  sync.WaitGroup
					childCode, dropCode int
					childBody, dropBody []byte
					start               = make(chan struct{})
				)
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					childCode, childBody = tc.child(t, ns, i)
				}()
				go func() {
					defer wg.Done()
					<-start
					dropCode, dropBody = call(t, "DELETE", "/v1/"+c+"/namespaces/"+ns, shared.Token, nil)
				}()
				close(start)
				wg.Wait()

				switch {
				case childCode == tc.won && dropCode == 409:
					childWins.Add(1)
					if typ, _, _ := errorModel(t, dropBody); typ != "NamespaceNotEmptyException" {
						t.Errorf("race %d: drop lost with %s, want NamespaceNotEmptyException", i, dropBody)
					}
				case childCode == 404 && dropCode == 204:
					dropWins.Add(1)
					if typ, _, _ := errorModel(t, childBody); typ != "NoSuchNamespaceException" {
						t.Errorf("race %d: child lost with %s, want NoSuchNamespaceException", i, childBody)
					}
					// Nothing of the loser may reappear with the namespace.
					expect(t, 200, "POST", "/v1/"+c+"/namespaces", map[string]any{"namespace": []string{ns}})
					var list struct {
						Identifiers []any `json:"identifiers"`
						Namespaces  []any `json:"namespaces"`
					}
					_ = json.Unmarshal(expect(t, 200, "GET", "/v1/"+c+"/namespaces/"+ns+"/tables", nil), &list)
					_ = json.Unmarshal(expect(t, 200, "GET", "/v1/"+c+"/namespaces?parent="+ns, nil), &list)
					if len(list.Identifiers)+len(list.Namespaces) != 0 {
						t.Errorf("race %d: a re-created namespace shows the loser: %+v", i, list)
					}
				default:
					t.Errorf("race %d: child %d %s, drop %d %s: want exactly one winner", i, childCode, childBody, dropCode, dropBody)
				}
			}
			// Four races at a time: each is still a race of exactly two requests.
			next := make(chan int)
			var workers sync.WaitGroup
			for range 4 {
				workers.Add(1)
				go func() {
					defer workers.Done()
					for i := range next {
						race(i)
					}
				}()
			}
			for i := range tc.races {
				next <- i
			}
			close(next)
			workers.Wait()
			t.Logf("%d races: child won %d, drop won %d", tc.races, childWins.Load(), dropWins.Load())
		})
	}
}
