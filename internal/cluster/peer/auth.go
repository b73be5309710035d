package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Request signing. Every request carries the sender's node name, the time
// it was made (unix milliseconds) and the HMAC-SHA256, under a key derived
// from the cluster key, of the method, the path, the query, the node and
// the time. A node serves only a request whose MAC is right and whose
// time is within MaxSkew of its own clock: without the cluster key nobody
// can ask for a byte, and a request seen on the wire is good for a minute
// at most (it reads bytes the eavesdropper saw already).
const (
	headerNode = "Epochfs-Node"
	headerTime = "Epochfs-Time"
	headerMAC  = "Epochfs-Mac"
)

// MaxSkew is how far a request's time may be from the server's clock.
const MaxSkew = time.Minute

// Signer signs and checks requests with the cluster's key.
type Signer struct{ key []byte }

// NewSigner derives the request key from the cluster key: the MACs of
// requests and of stored data never share a key.
func NewSigner(clusterKey []byte) Signer {
	h := hmac.New(sha256.New, clusterKey)
	h.Write([]byte("epochfs peer requests v1"))
	return Signer{key: h.Sum(nil)}
}

func (s Signer) mac(method, path, query, node, t string) []byte {
	h := hmac.New(sha256.New, s.key)
	for _, f := range []string{method, path, query, node, t} {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// Sign adds node's signature to r, made at now.
func (s Signer) Sign(r *http.Request, node string, now time.Time) {
	t := strconv.FormatInt(now.UnixMilli(), 10)
	r.Header.Set(headerNode, node)
	r.Header.Set(headerTime, t)
	r.Header.Set(headerMAC, hex.EncodeToString(s.mac(r.Method, r.URL.Path, r.URL.RawQuery, node, t)))
}

// Check returns the node that signed r, or why r is refused.
func (s Signer) Check(r *http.Request, now time.Time) (string, error) {
	node, t, sum := r.Header.Get(headerNode), r.Header.Get(headerTime), r.Header.Get(headerMAC)
	if node == "" || t == "" || sum == "" {
		return "", fmt.Errorf("%w: not signed", ErrRefused)
	}
	got, err := hex.DecodeString(sum)
	if err != nil || !hmac.Equal(got, s.mac(r.Method, r.URL.Path, r.URL.RawQuery, node, t)) {
		return "", fmt.Errorf("%w: bad signature (another cluster key?)", ErrRefused)
	}
	ms, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: bad time", ErrRefused)
	}
	if d := now.Sub(time.UnixMilli(ms)); d > MaxSkew || d < -MaxSkew {
		return "", fmt.Errorf("%w: signed %v from this node's clock (more than %v)", ErrRefused, d.Round(time.Second), MaxSkew)
	}
	return node, nil
}
