package emulators

import "github.com/icehold/icehold/shared/iampolicy"

// The emulators evaluate policies with shared/iampolicy, the matcher and
// statement type the catalog's grants use too: identity policies (a role's
// and a session's, for temporary credentials), bucket policies' Deny
// statements and roles' trust policies.

// access is one permission a request needs.
type access struct {
	action, resource string
	keys             map[string]string // condition keys of the request
}

func (a access) request(principal string) iampolicy.Request {
	return iampolicy.Request{Action: a.action, Resource: a.resource, Principal: principal, Keys: a.keys}
}
