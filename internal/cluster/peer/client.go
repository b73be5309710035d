package peer

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	Signer Signer
	// Node is this node's name in its requests.
	Node string
	// TLS, if set, speaks HTTPS to the peers (their certificates checked
	// against its roots); otherwise HTTP/2 without TLS.
	TLS *tls.Config
	// DialTimeout bounds a connection's set-up (default 1s): a dead peer
	// costs a read at most this.
	DialTimeout time.Duration
}

// Client reads from peers. One HTTP/2 connection per peer carries every
// request to it.
type Client struct {
	o      ClientOptions
	hc     *http.Client
	scheme string
}

// NewClient makes a client.
func NewClient(o ClientOptions) *Client {
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	var p http.Protocols
	scheme := "https"
	if o.TLS == nil {
		p.SetUnencryptedHTTP2(true)
		scheme = "http"
	} else {
		p.SetHTTP2(true)
	}
	tr := &http.Transport{
		DialContext:            (&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 15 * time.Second}).DialContext,
		TLSClientConfig:        o.TLS,
		TLSHandshakeTimeout:    o.DialTimeout,
		Protocols:              &p,
		IdleConnTimeout:        time.Minute,
		MaxResponseHeaderBytes: 16 << 10,
		ForceAttemptHTTP2:      true,
	}
	return &Client{o: o, hc: &http.Client{Transport: tr}, scheme: scheme}
}

// Close drops the idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) request(ctx context.Context, method, addr, path string, q url.Values) (*http.Response, error) {
	u := &url.URL{Scheme: c.scheme, Host: addr, Path: path, RawQuery: q.Encode()}
	r, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	c.o.Signer.Sign(r, c.o.Node, time.Now())
	resp, err := c.hc.Do(r)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	return resp, nil
}

// statusError maps an answer's status to the package's errors.
func statusError(addr string, resp *http.Response) error {
	var kind error
	switch resp.StatusCode {
	case http.StatusNotFound:
		kind = ErrNotHeld
	case http.StatusUnauthorized, http.StatusBadRequest:
		kind = ErrRefused
	case http.StatusServiceUnavailable:
		kind = ErrBusy
	case http.StatusConflict:
		kind = ErrNoRoom
	default:
		kind = fmt.Errorf("peer: status %d", resp.StatusCode)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	return fmt.Errorf("peer %s: %w (%s)", addr, kind, trimLine(msg))
}

func trimLine(b []byte) string {
	for i, c := range b {
		if c == '\n' || c < ' ' {
			b = b[:i]
			break
		}
	}
	return string(b)
}

// Range reads n bytes of version k from off at the peer at addr into a
// new buffer. Exactly n bytes or an error: a longer or shorter answer is
// ErrShort.
func (c *Client) Range(ctx context.Context, addr string, k Key, off int64, n int) ([]byte, error) {
	if n <= 0 || n > MaxRange {
		return nil, fmt.Errorf("peer: range of %d bytes", n)
	}
	q := query(k)
	q.Set("off", strconv.FormatInt(off, 10))
	q.Set("len", strconv.Itoa(n))
	resp, err := c.request(ctx, http.MethodGet, addr, "/v1/range", q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(addr, resp)
	}
	if resp.ContentLength >= 0 && resp.ContentLength != int64(n) {
		return nil, fmt.Errorf("peer %s: %w: %d bytes announced, %d asked", addr, ErrShort, resp.ContentLength, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		return nil, fmt.Errorf("peer %s: %w: %w", addr, ErrShort, err)
	}
	var one [1]byte
	if m, _ := resp.Body.Read(one[:]); m > 0 {
		return nil, fmt.Errorf("peer %s: %w: more than %d bytes", addr, ErrShort, n)
	}
	return buf, nil
}

// Fetch asks the peer at addr to copy version k now (it owns it): nil when
// it copies it or holds it; ErrNoRoom, ErrNotHeld (it has no such
// version), or a failure to reach it.
func (c *Client) Fetch(ctx context.Context, addr string, k Key) error {
	resp, err := c.request(ctx, http.MethodPost, addr, "/v1/fetch", query(k))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return statusError(addr, resp)
	}
	return nil
}

// Health asks the peer at addr whether it serves.
func (c *Client) Health(ctx context.Context, addr string) error {
	resp, err := c.request(ctx, http.MethodGet, addr, "/v1/health", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(addr, resp)
	}
	return nil
}
