package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
)

// TLS is a node's TLS identity: its certificate and key, and the CA that
// signs the certificates of its cluster (nodes and, with client
// certificate authentication, clients). With it the node serves HTTPS on
// its API and mutual TLS on its peer port (RaftNet): a peer must present a
// node certificate signed by the CA, and the node presents its own when it
// dials a peer, whose certificate it verifies against the CA.
//
// A node certificate is one valid for both server and client
// authentication (extended key usages serverAuth and clientAuth, or none):
// a client certificate (clientAuth only), signed by the same CA, is
// refused on the peer port.
type TLS struct {
	// Cert is the node's certificate chain and key.
	Cert tls.Certificate
	// CA holds the certificates of the cluster's CA.
	CA *x509.CertPool
}

// LoadTLS reads a node's TLS identity from PEM files: its certificate (the
// chain, leaf first), its key and the cluster's CA certificate(s).
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", certFile, keyFile, err)
	}
	pool, err := LoadCA(caFile)
	if err != nil {
		return nil, err
	}
	return &TLS{Cert: cert, CA: pool}, nil
}

// LoadCA reads the PEM certificates of caFile into a pool.
func LoadCA(caFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("tls: CA %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// ClientConfig returns the TLS configuration of a client of the API (the
// CLI, an application's client.Client): it verifies the nodes against
// the CA in caFile ("": the system's roots) and, when certFile is set,
// presents that certificate (for --client-cert-auth).
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCA(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls: a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate %s, key %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// APIConfig returns the TLS configuration of the node's HTTPS API: its
// certificate and, if requireClientCert, a client must present a
// certificate signed by the CA.
func (t *TLS) APIConfig(requireClientCert bool) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{t.Cert}}
	if requireClientCert {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = t.CA
	}
	return cfg
}

// PeerServerConfig is the TLS configuration of the peer port's listener:
// mutual TLS, the peer's certificate a node certificate signed by the CA.
func (t *TLS) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{t.Cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        t.CA,
		VerifyConnection: RequireNodeCert,
	}
}

// PeerClientConfig is the TLS configuration of a connection to a peer's
// port: the node's certificate, the peer's verified against the CA (and
// its address, which tls.Dialer takes for the server name).
func (t *TLS) PeerClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{t.Cert},
		RootCAs:          t.CA,
		VerifyConnection: RequireNodeCert,
	}
}

// RequireNodeCert refuses a peer whose certificate is not a node's: one
// whose extended key usages leave out server authentication (a client
// certificate of the same CA).
func RequireNodeCert(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: peer presented no certificate")
	}
	eku := cs.PeerCertificates[0].ExtKeyUsage
	if len(eku) == 0 || slices.Contains(eku, x509.ExtKeyUsageServerAuth) || slices.Contains(eku, x509.ExtKeyUsageAny) {
		return nil
	}
	return fmt.Errorf("tls: certificate of %q is not a node certificate (no serverAuth usage)", cs.PeerCertificates[0].Subject.CommonName)
}

// IsLoopback reports whether the host of addr (host:port) is a loopback
// address or "localhost": an address no other machine can reach. An
// empty host (all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
