package emulators

import (
	"bytes"
	"compress/flate"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/iampolicy"
	"github.com/icehold/icehold/shared/sigv4"
)

// The STS emulation: AssumeRole and GetCallerIdentity over STS's query
// protocol (form POST, XML answers), signed for service sts. It is served
// on the embedded S3's port: requests are told apart by the service their
// signature names, as LocalStack's single edge port does. AssumeRole is
// authorized as STS does it: the role's trust policy lets the caller in,
// and the caller's own permissions include sts:AssumeRole on the role;
// a caller with temporary credentials (role chaining) gets an hour at
// most.

// STS's bounds on AssumeRole.
const (
	stsMinDuration = 900 * time.Second
	stsMaxDuration = 12 * time.Hour
	stsMaxPolicy   = 2048
	// packedBudget is the emulation's stand-in for STS's packed-policy
	// limit, whose size AWS does not publish: the deflated policy against
	// this many bytes. It refuses no policy under 2,048 characters of
	// icehold's own shape (see the credentials package's tests), and does
	// refuse incompressible ones near the plaintext limit, as STS does.
	packedBudget = 1536
)

var sessionNameRE = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

// packedPercent estimates PackedPolicySize: the deflated policy's share of
// packedBudget, in percent (STS refuses above 100).
func packedPercent(policy string) int {
	if policy == "" {
		return 0
	}
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	_, _ = w.Write([]byte(policy))
	_ = w.Close()
	return (b.Len()*100 + packedBudget - 1) / packedBudget
}

type stsError struct {
	status      int
	code, msg   string
	senderFault bool
}

func (e stsError) Error() string { return e.code + ": " + e.msg }

// ServeSTS answers a request signed for sts.
func (m *IAM) ServeSTS(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeSTSError(w, stsError{http.StatusBadRequest, "IncompleteSignature", err.Error(), true})
		return
	}
	v := sigv4.Verifier{Service: "sts", Region: m.Region, MaxSkew: 15 * time.Minute, Keys: m.Lookup, Expiry: m.now}
	caller, err := v.Verify(r, body)
	if err != nil {
		writeSTSError(w, stsRefusal(err))
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeSTSError(w, stsError{http.StatusBadRequest, "MalformedQueryString", err.Error(), true})
		return
	}
	for k, vs := range r.URL.Query() {
		form[k] = vs
	}
	switch form.Get("Action") {
	case "AssumeRole":
		s, err := m.assumeRole(caller, form)
		if err != nil {
			var se stsError
			if !errors.As(err, &se) {
				se = stsError{http.StatusInternalServerError, "InternalFailure", err.Error(), false}
			}
			writeSTSError(w, se)
			return
		}
		writeSTS(w, "AssumeRole", assumeRoleResult{
			User:   assumedRoleUser{Arn: s.Principal, AssumedRoleID: s.AssumedRoleID},
			Creds:  stsCredentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.Secret, SessionToken: s.Token, Expiration: s.Expires.UTC().Format(time.RFC3339)},
			Packed: s.PackedPercent,
		})
	case "GetCallerIdentity":
		writeSTS(w, "GetCallerIdentity", callerIdentity{Arn: caller.Principal, UserID: caller.AccessKeyID, Account: Account})
	default:
		writeSTSError(w, stsError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version 2011-06-15", form.Get("Action")), true})
	}
}

func (m *IAM) assumeRole(caller sigv4.Key, form url.Values) (Session, error) {
	role, name, policy := form.Get("RoleArn"), form.Get("RoleSessionName"), form.Get("Policy")
	d := time.Hour
	if v := form.Get("DurationSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Session{}, stsError{http.StatusBadRequest, "ValidationError", "DurationSeconds must be a number", true}
		}
		d = time.Duration(n) * time.Second
	}
	switch {
	case !sessionNameRE.MatchString(name):
		return Session{}, stsError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]* and length 2 to 64", name), true}
	case d < stsMinDuration || d > stsMaxDuration:
		return Session{}, stsError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("The requested DurationSeconds exceeds the MaxSessionDuration set for this role (%d s) or is below 900.", int(stsMaxDuration/time.Second)), true}
	case len([]rune(policy)) > stsMaxPolicy:
		return Session{}, stsError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("1 validation error detected: Value at 'policy' failed to satisfy constraint: Member must have length less than or equal to %d", stsMaxPolicy), true}
	}
	if !m.mayAssume(caller, role) {
		return Session{}, stsError{http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: %s is not authorized to perform: sts:AssumeRole on resource: %s", caller.Principal, role), true}
	}
	// Role chaining: a caller with temporary credentials (a role's session:
	// a Lambda function's own, a vended one) gets at most an hour.
	if caller.Role != "" && d > time.Hour {
		return Session{}, stsError{http.StatusBadRequest, "ValidationError", "The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining.", true}
	}
	if policy != "" {
		if _, err := iampolicy.Parse(policy); err != nil {
			return Session{}, stsError{http.StatusBadRequest, "MalformedPolicyDocument", "The policy is not in the valid JSON format.", true}
		}
	}
	s := m.assume(role, name, policy, d)
	if s.PackedPercent > 100 {
		return Session{}, stsError{http.StatusBadRequest, "PackedPolicyTooLarge", fmt.Sprintf("Packed policy consumes %d%% of allotted space, please use smaller policy for this request.", s.PackedPercent), true}
	}
	return s, nil
}

// stsRefusal is STS's answer to a failed signature check.
func stsRefusal(err error) stsError {
	switch {
	case errors.Is(err, sigv4.ErrUnknownKey):
		return stsError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.", true}
	case errors.Is(err, sigv4.ErrExpired):
		return stsError{http.StatusBadRequest, "ExpiredToken", "The security token included in the request is expired", true}
	case errors.Is(err, sigv4.ErrNotSigned):
		return stsError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token", true}
	case errors.Is(err, sigv4.ErrSkew):
		return stsError{http.StatusForbidden, "SignatureDoesNotMatch", "Signature expired", true}
	}
	return stsError{http.StatusForbidden, "SignatureDoesNotMatch", err.Error(), true}
}

type assumedRoleUser struct {
	Arn           string `xml:"Arn"`
	AssumedRoleID string `xml:"AssumedRoleId"`
}

type stsCredentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken"`
	Expiration      string `xml:"Expiration"`
}

type assumeRoleResult struct {
	User   assumedRoleUser `xml:"AssumedRoleUser"`
	Creds  stsCredentials  `xml:"Credentials"`
	Packed int             `xml:"PackedPolicySize"`
}

type callerIdentity struct {
	Arn     string `xml:"Arn"`
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
}

const stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"

func writeSTS(w http.ResponseWriter, action string, result any) {
	type envelope struct {
		XMLName xml.Name
		NS      string `xml:"xmlns,attr"`
		Result  any
		Meta    struct {
			RequestID string `xml:"RequestId"`
		} `xml:"ResponseMetadata"`
	}
	e := envelope{XMLName: xml.Name{Local: action + "Response"}, NS: stsNS, Result: result}
	e.Meta.RequestID = uuid.NewString()
	b, _ := xml.Marshal(e)
	// The result element is named after the action.
	b = bytes.Replace(b, []byte("<Result>"), []byte("<"+action+"Result>"), 1)
	b = bytes.Replace(b, []byte("</Result>"), []byte("</"+action+"Result>"), 1)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(b)
}

func writeSTSError(w http.ResponseWriter, e stsError) {
	typ := "Receiver"
	if e.senderFault {
		typ = "Sender"
	}
	var msg bytes.Buffer
	_ = xml.EscapeText(&msg, []byte(e.msg))
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
		stsNS, typ, e.code, msg.String(), uuid.NewString())
}
