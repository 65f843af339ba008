package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/local/server"
)

// Engines (docs/design/simulation.md, "Engines"): a session is what an
// engine got from a table answer with X-Iceberg-Access-Delegation:
// vended-credentials (an STS session scoped to the table's prefixes), and
// it keeps using it whatever happens to the table afterwards, until it
// expires by the simulated clock. Through it an engine appends (iceberg-go
// with vended credentials), writes objects it never commits, tries to
// delete, to write a metadata file or to write beside its table, starts and
// aborts multipart uploads. What the model holds it to: a session reads
// and writes under its table's location and nowhere else, never deletes,
// never writes a metadata file, writes only if its principal could write
// when it was vended, and nothing works once it has expired. Overwriting
// committed files is generated only on a build that can repair them
// (issue 29's verify and repair; coverage says n/a until then).

const delegation = "X-Iceberg-Access-Delegation"

// session is one vended session an engine holds.
type session struct {
	n         int
	g         *Gen
	principal string
	prefix    string // the credential's prefix, as vended
	location  string // the table's location when vended
	cfg       map[string]string
	write     bool // the principal held TABLE_WRITE when it was vended
	// writeUnsure: a grant of the same round may have landed either side.
	writeUnsure bool
	expires     time.Time
}

func (se *session) String() string {
	return fmt.Sprintf("session%d(%s of %s)", se.n, se.principal, se.g)
}

// s3 is an S3 client signing with the session's keys; its requests pass the
// round's token as an actor's do.
func (s *Sim) sessionS3(se *session) *s3.Client {
	c := se.cfg
	return s3.New(s3.Options{
		Region: server.Region, BaseEndpoint: aws.String(s.w.srv.Info.S3Endpoint), UsePathStyle: true,
		HTTPClient: &http.Client{Transport: s.w.transport(http.DefaultTransport), Timeout: time.Minute},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c["s3.access-key-id"], SecretAccessKey: c["s3.secret-access-key"], SessionToken: c["s3.session-token"]}, nil
		}),
		RetryMaxAttempts: 1,
	})
}

func s3Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	if err != nil {
		return "error"
	}
	return ""
}

// s3Status: an S3 answer as the trace and the judge see it.
func s3Status(err error) Outcome {
	switch code := s3Code(err); code {
	case "":
		return Outcome{Status: 200}
	case "AccessDenied":
		return Outcome{Status: 403, Body: []byte(code)}
	case "ExpiredToken":
		return Outcome{Status: 400, Body: []byte(code)}
	case "NoSuchKey", "NoSuchUpload":
		return Outcome{Status: 404, Body: []byte(code)}
	default:
		return Outcome{Status: 500, Body: []byte(err.Error())}
	}
}

// --- vending ---

func (s *Sim) opEngineLoad() *Op {
	ns, name, g := s.target()
	return s.engineLoadOf(ns, name, g, s.principal())
}

func (s *Sim) engineLoadOf(ns, name string, g *Gen, p string) *Op {
	return s.engineLoad(ns, name, g, p, s.chance(0.5))
}

// engineLoad: revalidate, an engine that loaded the table before sends the
// tag it got (If-None-Match); a 304 keeps the credentials it holds, so a
// fresh load follows it to see what they should be now.
func (s *Sim) engineLoad(ns, name string, g *Gen, p string, revalidate bool) *Op {
	op := &Op{desc: fmt.Sprintf("engine of %s loads %s.%s with vended credentials", p, ns, name), keys: tableKeys(ns, name)}
	if g == nil {
		op.want = []int{404}
	} else {
		op.want = []int{200}
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	s.privileged(op, p, "TABLE_READ")
	write := s.may(p, "TABLE_WRITE")
	// The header is a list of mechanisms (the REST spec): clients name
	// more than one, in any order.
	asks := pick(s, []string{"vended-credentials", "vended-credentials", "remote-signing,vended-credentials", "vended-credentials, remote-signing"})
	key := p + " " + ns + "." + name
	prev, cond := s.vendTags[key]
	cond = cond && g != nil && prev.se.g == g && revalidate
	var first Outcome
	op.run = func() Outcome {
		if cond {
			first = s.w.call(s.ctx, p, "GET", tablePath(ns, name), nil, delegation, asks, "If-None-Match", prev.tag)
			if first.Status != 304 {
				return first
			}
		}
		return s.w.call(s.ctx, p, "GET", tablePath(ns, name), nil, delegation, asks)
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		if cond && first.Status == 304 {
			if err := s.revalidated(prev, write, contended); err != nil {
				return err
			}
		}
		var res struct {
			Meta     string `json:"metadata-location"`
			Metadata struct {
				UUID     string `json:"table-uuid"`
				Location string `json:"location"`
			} `json:"metadata"`
			Creds []struct {
				Prefix string            `json:"prefix"`
				Config map[string]string `json:"config"`
			} `json:"storage-credentials"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("load answer: %v", err)
		}
		lg := s.genByUUID(res.Metadata.UUID, ns, name, live)
		if lg == nil {
			lg = s.genByUUID(res.Metadata.UUID, "", "", live, soft, purging)
		}
		if lg == nil && contended && s.genByUUID(res.Metadata.UUID, "", "", unregistered, released, gone) != nil {
			// An unregister or a drop of the same round landed after the
			// load read the table (soak seed 1040 step 235): the session
			// is the engine's, but of a table the model no longer holds;
			// the engine does not use it.
			s.logf("   a load of %s.%s raced the end of %s: its session is not used", ns, name, res.Metadata.UUID)
			return nil
		}
		if lg == nil {
			return s.violatef("a load of %s.%s answered uuid %s, which the model holds as no table", ns, name, res.Metadata.UUID)
		}
		if len(res.Creds) == 0 {
			// No credentials: a location no session policy can be scoped
			// to (characters, length), or a table that owns none.
			s.logf("   no storage-credentials for %s", lg)
			return nil
		}
		if len(res.Creds) != 1 {
			return s.violatef("%s: %d storage credentials, want one (SPEC §2)", lg, len(res.Creds))
		}
		c := res.Creds[0]
		if !strings.HasPrefix(res.Meta, c.Prefix) || !strings.HasPrefix(normLoc(res.Metadata.Location)+"/", normLoc(c.Prefix)+"/") && !strings.HasPrefix(normLoc(res.Metadata.Location)+"/", c.Prefix) {
			return s.violatef("%s: the credential's prefix %s does not cover its location %s", lg, c.Prefix, res.Metadata.Location)
		}
		ms, err := strconv.ParseInt(c.Config["s3.session-token-expires-at-ms"], 10, 64)
		if err != nil {
			return s.violatef("%s: the credential has no expiry: %v", lg, c.Config)
		}
		// STS's bounds: at least 15 minutes, at most the hour role
		// chaining allows (SPEC §2).
		d := time.UnixMilli(ms).Sub(s.w.clock.Now())
		if d < 15*time.Minute-time.Second || d > time.Hour+time.Second {
			return s.violatef("%s: a session that lasts %v (STS: 15 minutes to 1 hour under role chaining)", lg, d)
		}
		// And as long as the catalog says (held-out 10: the setting
		// ignored), unless the round changed it.
		if want := s.vendFor(); s.touched["props"] == 0 && (d < want-time.Minute || d > want+time.Second) {
			return s.violatef("%s: a session that lasts %v, where the catalog's vended-credentials.duration promises %v", lg, d, want)
		}
		s.m.nextSession++
		// A legal-held table's sessions are read-only, whoever asks (SPEC
		// §2); a hold changed in the same round may land either side.
		se := &session{n: s.m.nextSession, g: lg, principal: p, prefix: c.Prefix, location: res.Metadata.Location, cfg: c.Config,
			write: write && !lg.legalHold, expires: time.UnixMilli(ms), writeUnsure: s.touched["grants"] > 1 || lg.holdUnsure || contended}
		s.sessions = append(s.sessions, se)
		if tag := o.Header.Get("ETag"); tag != "" {
			if s.vendTags == nil {
				s.vendTags = map[string]vendTag{}
			}
			s.vendTags[key] = vendTag{tag: tag, se: se}
		}
		if len(s.sessions) > 6 {
			s.sessions = s.sessions[1:]
		}
		s.logf("   %s vended (write %v, expires %s)", se, se.write, se.expires.Format(time.RFC3339))
		return nil
	}
	return op
}

// vendTag: the tag of a vended load and the session it vended.
type vendTag struct {
	tag string
	se  *session
}

// revalidated judges a 304 to an engine revalidating its load: the
// engine keeps the session that load vended, which is right only while a
// load now would vend what it holds (SPEC §2: a reader granted
// TABLE_WRITE, a writer revoked, a table put under legal hold get new
// credentials, not a 304). write: the principal holds TABLE_WRITE now.
func (s *Sim) revalidated(prev vendTag, write, contended bool) error {
	se, g := prev.se, prev.se.g
	now := write && !g.legalHold
	if contended || se.writeUnsure || g.holdUnsure || s.touched["grants"] > 1 || s.m.namespaces[g.ns]["icehold.legal-hold"] != "" || s.m.catProps["icehold.legal-hold"] != "" {
		return nil
	}
	if se.write != now {
		return s.violatef("%s: revalidated with its tag (304), the engine keeps credentials that write=%v, where a load now vends write=%v", se, se.write, now)
	}
	return nil
}

// pickSession picks a session an engine still holds.
func (s *Sim) pickSession() *session {
	if len(s.sessions) == 0 {
		return nil
	}
	return pick(s, s.sessions)
}

// expired: the session is past its expiry by the simulated clock (STS
// sessions are issued and expire by it; clients sign in real time).
func (s *Sim) expired(se *session) bool { return !s.w.clock.Now().Before(se.expires) }

// bucketKey splits a location into bucket and key (any s3 scheme).
func bucketKey(loc string) (string, string) {
	rest := normLoc(loc)
	rest = strings.TrimPrefix(rest, "s3://")
	b, k, _ := strings.Cut(rest, "/")
	return b, k
}

// --- what a session may do ---

// opEngineWrite: the engine writes an object it never commits under its
// table's location (a failed job's output): allowed for a write session
// until it expires; the purge's final listing takes it as unreferenced.
func (s *Sim) opEngineWrite() *Op {
	if se := s.pickSession(); se != nil {
		return s.engineWriteWith(se)
	}
	return nil
}

func (s *Sim) engineWriteWith(se *session) *Op {
	b, k := bucketKey(se.location)
	s.m.nextRow++
	key := fmt.Sprintf("%s/data/engine-%d.parquet", k, s.m.nextRow)
	op := &Op{kind: "engine-write", desc: fmt.Sprintf("%s writes uncommitted %s", se, key), keys: []string{"uuid:" + se.g.uuid, "id:" + se.g.ident()}}
	switch {
	case s.expired(se):
		op.want, op.why = []int{400}, "the session expired"
	case se.writeUnsure:
		op.want = []int{200, 403}
	case !se.write:
		op.want, op.why = []int{403}, "a read-only session"
	case se.g.state != live:
		// Keys vended before a drop or a hold: refused once the bucket
		// enforces the lifecycle (issue 29), allowed until then.
		op.want = []int{200, 403}
	default:
		op.want = []int{200}
	}
	op.run = func() Outcome {
		_, err := s.sessionS3(se).PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(key), Body: bytes.NewReader([]byte("PAR1 not committed"))})
		return s3Status(err)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status == 200 && se.g.state != live {
			// Written after its table stopped being live (a purge may have
			// listed the prefix already): no catalog deletes what an engine
			// writes after it looked (issue 29 makes the bucket refuse it).
			s.m.strays[key] = true
		}
		return nil
	}
	return op
}

// opEngineEscape: the engine tries what no session may: delete one of its
// table's files, write a metadata file, write beside its table (a sibling
// prefix that shares its name's start, its parent, another table's
// location). Every one is refused and changes nothing.
func (s *Sim) opEngineEscape() *Op {
	if se := s.pickSession(); se != nil {
		return s.engineEscapeWith(se, -1)
	}
	return nil
}

// engineEscapeWith: se tries attempt which (-1: one at random; 0: the
// sibling prefix that shares its name's start, L/x2 beside L/x).
func (s *Sim) engineEscapeWith(se *session, which int) *Op {
	b, k := bucketKey(se.location)
	var others []string
	for _, o := range s.m.inState(live, soft) {
		if o != se.g && !overlaps(o.location, se.location) {
			others = append(others, o.location)
		}
	}
	type attempt struct {
		what string
		do   func(c *s3.Client) error
	}
	put := func(key string) func(c *s3.Client) error {
		return func(c *s3.Client) error {
			_, err := c.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(key), Body: bytes.NewReader([]byte("x"))})
			return err
		}
	}
	attempts := []attempt{
		{"write a sibling prefix " + k + "2/data/x.parquet", put(k + "2/data/x.parquet")},
		{"write a sibling prefix " + k + "-x/data/x.parquet", put(k + "-x/data/x.parquet")},
		{"write a metadata file " + k + "/metadata/99999-engine.metadata.json", put(k + "/metadata/99999-engine.metadata.json")},
		{"write the parent " + parentOf(k) + "/engine.parquet", put(parentOf(k) + "/engine.parquet")},
	}
	if len(others) > 0 {
		_, ok := bucketKey(pick(s, others))
		attempts = append(attempts, attempt{"write another table's location " + ok, put(ok + "/data/engine.parquet")})
	}
	if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, se.g.meta); err == nil {
		var keys []string
		for key := range r.keys {
			keys = append(keys, key)
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			victim := pick(s, keys)
			attempts = append(attempts, attempt{"delete its table's file " + victim, func(c *s3.Client) error {
				_, err := c.DeleteObject(s.ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String(victim)})
				return err
			}})
		}
	}
	var a attempt
	if which < 0 {
		a = pick(s, attempts)
	} else {
		a = attempts[min(which, len(attempts)-1)]
	}
	op := &Op{kind: "engine-escape", desc: fmt.Sprintf("%s tries to %s", se, a.what), keys: []string{"uuid:" + se.g.uuid}, invalid: true,
		why: "a vended session writes only its table's data, never a metadata file, never deletes", want: []int{403}}
	if s.expired(se) {
		op.want = []int{400}
	}
	op.run = func() Outcome { return s3Status(a.do(s.sessionS3(se))) }
	return op
}

func parentOf(k string) string {
	if i := strings.LastIndex(k, "/"); i > 0 {
		return k[:i]
	}
	return k
}

// opEngineUpload: a multipart upload under its table, started, one part
// sent, then aborted (an engine's failed write): nothing is left.
func (s *Sim) opEngineUpload() *Op {
	if se := s.pickSession(); se != nil {
		return s.engineUploadWith(se)
	}
	return nil
}

func (s *Sim) engineUploadWith(se *session) *Op {
	b, k := bucketKey(se.location)
	s.m.nextRow++
	key := fmt.Sprintf("%s/data/upload-%d.parquet", k, s.m.nextRow)
	op := &Op{kind: "engine-upload", desc: fmt.Sprintf("%s starts, sends a part of and aborts an upload of %s", se, key), keys: []string{"uuid:" + se.g.uuid}}
	switch {
	case s.expired(se):
		op.want = []int{400}
	case se.writeUnsure:
		op.want = []int{200, 403}
	case !se.write:
		op.want = []int{403}
	case se.g.state != live:
		op.want = []int{200, 403}
	default:
		op.want = []int{200}
	}
	op.run = func() Outcome {
		c := s.sessionS3(se)
		up, err := c.CreateMultipartUpload(s.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String(key)})
		if err != nil {
			return s3Status(err)
		}
		if _, err := c.UploadPart(s.ctx, &s3.UploadPartInput{Bucket: aws.String(b), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(bytes.Repeat([]byte("p"), 64))}); err != nil {
			return s3Status(err)
		}
		_, err = c.AbortMultipartUpload(s.ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(b), Key: aws.String(key), UploadId: up.UploadId})
		return s3Status(err)
	}
	op.after = func(o Outcome, _ bool) error {
		if _, err := s.w.s3.HeadObject(s.ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String(key)}); err == nil {
			return s.violatef("%s: an aborted upload left %s", se, key)
		}
		return nil
	}
	return op
}

// opEngineAppend: an engine appends with vended credentials (iceberg-go
// asks for them and writes its data files, manifest and list with the
// session, refreshing it through /credentials).
func (s *Sim) opEngineAppend() *Op {
	ns, name, g := s.target()
	if g != nil && !plainLocation(g.location) {
		return nil
	}
	op := s.appendOp(ns, name, g, pick(s, []string{admin, writer}))
	op.desc = "engine (vended credentials): " + op.desc
	op.vended = true
	return op
}

// plainLocation: a location whose keys every FileIO writes the same way.
func plainLocation(loc string) bool {
	return !strings.ContainsAny(loc, "%# +ü")
}

// exists says whether a path's object is in the bucket now.
func (s *Sim) exists(path string) bool {
	k, ok := keyOf(path)
	if !ok {
		return false
	}
	_, err := s.w.s3.HeadObject(s.ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
	return err == nil
}
