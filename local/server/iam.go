package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/authz"
)

// Local IAM identities (`icehold local iam`): users whose access keys sign
// requests with SigV4, as clients configured for AWS do. <dir>/iam.json
// holds them and the key that signs the STS emulation's session tokens;
// it is edited under the same kind of lock as tokens.json, and the server
// reads it again when it meets an access key it does not know.

// IAMFileName is the local account's file in the state folder.
const IAMFileName = "iam.json"

// VendingRole is the local role whose sessions vended credentials are (the
// stack's vending role, with the same policy).
const VendingRole = "icehold-vending"

// User is a local IAM user.
type User struct {
	Name            string `json:"name"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	Created         string `json:"created"`
}

// Principal is the user's ARN, what the catalog's grants name.
func (u User) Principal() string { return emulators.UserPrincipal(u.Name) }

type iamFile struct {
	SessionKey string          `json:"session_key"`
	Users      map[string]User `json:"users"`
}

var userName = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)

func iamPath(dir string) string { return filepath.Join(dir, IAMFileName) }

func readIAM(dir string) (iamFile, error) {
	f := iamFile{Users: map[string]User{}}
	b, err := os.ReadFile(iamPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", iamPath(dir), err)
	}
	if f.Users == nil {
		f.Users = map[string]User{}
	}
	return f, nil
}

// updateIAM is one read-modify-write of iam.json under its lock.
func updateIAM(dir string, change func(*iamFile) error) (iamFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return iamFile{}, err
	}
	unlock, err := lockPath(filepath.Join(dir, IAMFileName+".lock"))
	if err != nil {
		return iamFile{}, err
	}
	defer unlock()
	f, err := readIAM(dir)
	if err != nil {
		return f, err
	}
	if f.SessionKey == "" {
		f.SessionKey = hex.EncodeToString(emulators.NewSessionKey())
	}
	if err := change(&f); err != nil {
		return f, err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return f, err
	}
	return f, writeFileAtomic(iamPath(dir), append(b, '\n'))
}

func randomKey(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + strings.ToUpper(hex.EncodeToString(b))
}

// AddUser makes a local IAM user with an access key pair (the server need
// not run; a running one knows the user from its next request on).
func AddUser(dir, name string) (User, error) {
	u, err := newUser(name)
	if err != nil {
		return User{}, err
	}
	_, err = updateIAM(dir, func(f *iamFile) error {
		if _, ok := f.Users[name]; ok {
			return fmt.Errorf("user %s exists already (icehold local iam list)", name)
		}
		f.Users[name] = u
		return nil
	})
	return u, err
}

// newUser makes a user's access key pair.
func newUser(name string) (User, error) {
	if !userName.MatchString(name) {
		return User{}, fmt.Errorf("user name %q: 1 to 64 of letters, digits and +=,.@_-", name)
	}
	if err := authz.ValidatePrincipal(emulators.UserPrincipal(name)); err != nil {
		return User{}, err // the rule every principal meets (the name's is narrower)
	}
	secret := make([]byte, 30)
	_, _ = rand.Read(secret)
	return User{Name: name, AccessKeyID: randomKey("AKIA", 8), SecretAccessKey: base64.RawStdEncoding.EncodeToString(secret),
		Created: time.Now().UTC().Format(time.RFC3339)}, nil
}

// ListUsers returns the local users by name.
func ListUsers(dir string) ([]User, error) {
	f, err := readIAM(dir)
	if err != nil {
		return nil, err
	}
	out := make([]User, 0, len(f.Users))
	for _, u := range f.Users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// users is the server's view of iam.json's users, read again on a miss.
type users struct {
	dir   string
	mu    sync.Mutex
	byKey map[string]User
}

func (u *users) lookup(accessKeyID string) (string, string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if usr, ok := u.byKey[accessKeyID]; ok {
		return usr.Name, usr.SecretAccessKey, true
	}
	if u.dir == "" {
		return "", "", false
	}
	f, err := readIAM(u.dir)
	if err != nil {
		return "", "", false
	}
	u.byKey = map[string]User{}
	for _, usr := range f.Users {
		u.byKey[usr.AccessKeyID] = usr
	}
	usr, ok := u.byKey[accessKeyID]
	return usr.Name, usr.SecretAccessKey, ok
}

// sessionKey is iam.json's session key (made on first start; in memory
// without a state folder).
func sessionKey(dir string) ([]byte, error) {
	if dir == "" {
		return emulators.NewSessionKey(), nil
	}
	f, err := updateIAM(dir, func(*iamFile) error { return nil })
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(f.SessionKey)
}
