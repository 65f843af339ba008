package router

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// Listener makes net/http's own refusals answer the ErrorModel. A request
// net/http cannot parse (a control byte such as 0x7f in a header value, a
// malformed Host, headers too large) never reaches a handler: the server
// writes a text/plain answer on the connection itself, and no option
// changes that. Wrapping the connections rewrites exactly those answers.
// (In AWS, API Gateway parses requests; this is the local server's seam.)
func Listener(l net.Listener) net.Listener { return refusalListener{l} }

type refusalListener struct{ net.Listener }

func (l refusalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return refusalConn{c}, nil
}

// netHTTPRefusal frames net/http's refusals (server.go, conn.serve): a
// status line, these headers, then the text, in one write.
const netHTTPRefusal = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

type refusalConn struct{ net.Conn }

func (c refusalConn) Write(p []byte) (int, error) {
	head, text, ok := bytes.Cut(p, []byte(netHTTPRefusal))
	// A handler's answer has more headers after its status line (Date at
	// least): only net/http's refusal has the status line alone before these.
	if !ok || !bytes.HasPrefix(head, []byte("HTTP/1.1 ")) || bytes.Contains(head, []byte("\r\n")) || len(head) < 12 {
		return c.Conn.Write(p)
	}
	status, err := strconv.Atoi(string(head[9:12]))
	if err != nil || status < 400 {
		return c.Conn.Write(p)
	}
	body := refusalBody(status, string(text))
	answer := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if _, err := c.Conn.Write([]byte(answer)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite keeps net/http's half-close (after a 431) on TCP connections.
func (c refusalConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
