package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/icehold/icehold/shared/authz"
)

// The local bearer tokens live in <dir>/tokens.json, a JSON object of
// token → principal. Everything that changes the file (the server's first
// start and AddToken, `icehold local token add|revoke`) goes through
// updateTokens: an exclusive lock on <dir>/tokens.json.lock (flock, so a
// crashed writer leaves no stale lock), read, change, then a temp file in the
// same directory, fsync and rename over tokens.json (mode 0600). A reader
// therefore sees the old or the new file, never half of one, and concurrent
// writers (goroutines or processes) lose no token. A running server reloads
// the file when it changes (Server.refreshTokens).

// TokensFileName is the token file's name in a state directory.
const TokensFileName = "tokens.json"

// Token is one entry of tokens.json.
type Token struct {
	Token     string `json:"token"`
	Principal string `json:"principal"`
}

// ErrLastAdmin refuses a revoke that would leave no AdminPrincipal token.
var ErrLastAdmin = errors.New("refusing to revoke the last " + AdminPrincipal + " token")

// NewToken returns a fresh random bearer token.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return "ih_" + hex.EncodeToString(b)
}

// MaskToken shows enough of a token to tell it apart, not to use it.
func MaskToken(tok string) string {
	if len(tok) < 16 {
		return "****"
	}
	return tok[:7] + "..." + tok[len(tok)-4:]
}

func tokensPath(dir string) string { return filepath.Join(dir, TokensFileName) }

// readTokens reads dir's tokens.json; a missing file is no tokens.
func readTokens(dir string) (map[string]string, error) {
	m, _, err := readTokensFile(tokensPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	return m, err
}

// readTokensFile reads path and the stat of what it read (one open file, so
// the two describe the same version).
func readTokensFile(path string) (map[string]string, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, fi, nil
}

// ListTokens returns dir's tokens sorted by principal, then token.
func ListTokens(dir string) ([]Token, error) {
	if _, err := os.Stat(tokensPath(dir)); err != nil {
		return nil, fmt.Errorf("no tokens in %s (start the local server once, or add a token): %w", dir, err)
	}
	m, err := readTokens(dir)
	if err != nil {
		return nil, err
	}
	return sortedTokens(m), nil
}

func sortedTokens(m map[string]string) []Token {
	out := make([]Token, 0, len(m))
	for t, p := range m {
		out = append(out, Token{Token: t, Principal: p})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Principal != out[j].Principal {
			return out[i].Principal < out[j].Principal
		}
		return out[i].Token < out[j].Token
	})
	return out
}

// AddTokenTo makes a token for principal in dir's tokens.json (creating the
// directory and the file if needed) and returns it. A running server on dir
// accepts it from its next request on.
func AddTokenTo(dir, principal string) (string, error) {
	if err := authz.ValidatePrincipal(principal); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tok := NewToken()
	err := updateTokens(dir, func(m map[string]string) (bool, error) {
		m[tok] = principal
		return true, nil
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// RevokeTokens removes from dir's tokens.json the token arg or, when no token
// is arg, every token of the principal arg, and returns what it removed. It
// refuses (ErrLastAdmin) to leave no AdminPrincipal token. When local.json
// names a revoked token as admin_token, it names a remaining admin token
// instead (the CLI's commands read it).
func RevokeTokens(dir, arg string) ([]Token, error) {
	if _, err := os.Stat(tokensPath(dir)); err != nil {
		return nil, fmt.Errorf("no tokens in %s: %w", dir, err)
	}
	var revoked []Token
	var admin string
	err := updateTokens(dir, func(m map[string]string) (bool, error) {
		if p, ok := m[arg]; ok {
			revoked = []Token{{Token: arg, Principal: p}}
		} else {
			for _, t := range sortedTokens(m) {
				if t.Principal == arg {
					revoked = append(revoked, t)
				}
			}
		}
		if len(revoked) == 0 {
			return false, fmt.Errorf("no token and no principal %q in %s", arg, tokensPath(dir))
		}
		revokesAdmin := false
		for _, t := range revoked {
			delete(m, t.Token)
			revokesAdmin = revokesAdmin || t.Principal == AdminPrincipal
		}
		for _, t := range sortedTokens(m) {
			if t.Principal == AdminPrincipal {
				admin = t.Token
				break
			}
		}
		if admin != "" || !revokesAdmin {
			return true, nil
		}
		return false, fmt.Errorf("%w: the local server's admin needs one (add another with `icehold local token add %s` first)", ErrLastAdmin, AdminPrincipal)
	})
	if err != nil {
		return nil, err
	}
	return revoked, repointLocalJSON(dir, revoked, admin)
}

// repointLocalJSON replaces a revoked admin_token in local.json by admin.
func repointLocalJSON(dir string, revoked []Token, admin string) error {
	if admin == "" {
		return nil
	}
	path := filepath.Join(dir, "local.json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var info map[string]any
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cur, _ := info["admin_token"].(string)
	for _, t := range revoked {
		if t.Token == cur {
			info["admin_token"] = admin
			b, _ := json.MarshalIndent(info, "", "  ")
			return writeFileAtomic(path, append(b, '\n'))
		}
	}
	return nil
}

// updateTokens runs change on dir's tokens under the file lock and writes
// them back when change says so.
func updateTokens(dir string, change func(map[string]string) (bool, error)) error {
	unlock, err := lockTokens(dir)
	if err != nil {
		return err
	}
	defer unlock()
	m, err := readTokens(dir)
	if err != nil {
		return err
	}
	changed, err := change(m)
	if err != nil || !changed {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(tokensPath(dir), append(b, '\n'))
}

// writeFileAtomic replaces path with data (mode 0600): temp file in the same
// directory, fsync, rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// tokensStamp identifies one version of tokens.json without reading it.
type tokensStamp struct {
	fi os.FileInfo
	// racy: the file was read so soon after it was written that a later
	// write could carry the same modification time (timestamps are coarse,
	// and a rename may reuse a freed inode with the same size); such a file
	// is read again until it is old enough to be told apart by its stamp.
	racy bool
	// failed: the last reload failed (missing or malformed file); the next
	// call tries again.
	failed bool
}

// racyWindow is longer than any file system's timestamp granularity that
// matters here (ext4/APFS: ns, HFS+: 1 s).
const racyWindow = 2 * time.Second

// unchanged: fi is the version the stamp was taken from.
func (st tokensStamp) unchanged(fi os.FileInfo) bool {
	return st.fi != nil && !st.racy && os.SameFile(st.fi, fi) &&
		st.fi.Size() == fi.Size() && st.fi.ModTime().Equal(fi.ModTime())
}
