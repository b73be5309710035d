package peer

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSFiles name a node's certificate and key and the bundle of the CA
// that signs every node's certificate (the peer port's TLS; CA empty: the
// system's roots).
type TLSFiles struct {
	Cert, Key, CA string
}

// On reports whether TLS is configured.
func (f TLSFiles) On() bool { return f.Cert != "" || f.Key != "" }

// Configs loads the files: the server's configuration (this node's
// certificate) and the client's (the peers' certificates checked against
// the CA, for the host the peer is reached at). Errors name the file.
func (f TLSFiles) Configs() (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("peer_cert_file %s, peer_key_file %s: %w", f.Cert, f.Key, err)
	}
	var pool *x509.CertPool
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("ca_file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("ca_file %s: no PEM certificate in it", f.CA)
		}
	}
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	client = &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	return server, client, nil
}
