package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftlock/raftlock/transport/tlsconf"
)

// certValidity is how long the certificates of a run are valid.
const certValidity = 24 * time.Hour

// certFiles are the PEM files of a run with TLS (see writeCerts): the CA,
// a node certificate per node and one client certificate, which the
// client processes and the checker's own health probes present.
type certFiles struct {
	CA         string
	ClientCert string
	ClientKey  string
	dir        string
}

// nodeCert returns the certificate and key files of node id.
func (f *certFiles) nodeCert(id string) (cert, key string) {
	return filepath.Join(f.dir, id+".pem"), filepath.Join(f.dir, id+"-key.pem")
}

// writeCerts makes a CA, a node certificate for each node (valid at its
// 127.0.0.x address) and a client certificate, as raftlock tls init does,
// and writes them to dir.
func writeCerts(dir string, nodes []*nodeProc) (*certFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls dir: %w", err)
	}
	ca, err := tlsconf.NewCA("raftlock-check CA", certValidity)
	if err != nil {
		return nil, err
	}
	f := &certFiles{CA: filepath.Join(dir, "ca.pem"), ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey: filepath.Join(dir, "client-key.pem"), dir: dir}
	write := func(path string, data []byte) error {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		return nil
	}
	if err := write(f.CA, ca.CertPEM()); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		c, k, err := ca.IssueNode(n.id, []string{n.ip}, certValidity)
		if err != nil {
			return nil, err
		}
		cp, kp := f.nodeCert(n.id)
		if err := write(cp, c); err != nil {
			return nil, err
		}
		if err := write(kp, k); err != nil {
			return nil, err
		}
	}
	c, k, err := ca.IssueClient("raftlock-check-client", certValidity)
	if err != nil {
		return nil, err
	}
	if err := write(f.ClientCert, c); err != nil {
		return nil, err
	}
	if err := write(f.ClientKey, k); err != nil {
		return nil, err
	}
	return f, nil
}

// clientTLS returns the TLS configuration of a client of the run's
// cluster: the CA, and the client certificate (--client-cert-auth).
func (f *certFiles) clientTLS() (*tls.Config, error) {
	return tlsconf.ClientConfig(f.CA, f.ClientCert, f.ClientKey)
}

// nodeURL is the URL of the API at addr (host:port, or a URL with its
// scheme: https://host:port), http if it has none.
func nodeURL(addr, path string) string {
	if strings.Contains(addr, "://") {
		return addr + path
	}
	return "http://" + addr + path
}

// hostPort strips the scheme off addr.
func hostPort(addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		return rest
	}
	return addr
}
