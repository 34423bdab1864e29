package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// certValidity is how long tls init's CA and certificates are valid.
const certValidity = 10 * 365 * 24 * time.Hour

const tlsInitHelp = `Writes into DIR (made if missing, mode 0700) what a cluster needs for TLS: a
CA (ca.pem, ca-key.pem; ECDSA P-256, valid 10 years), for each --node ID=HOST a
node certificate (ID.pem, ID-key.pem: server and client authentication, for
HOST, which may list several IPs or DNS names separated by "+", and for
localhost, 127.0.0.1 and ::1), and for each --client NAME a client certificate
(NAME.pem, NAME-key.pem: client authentication only, refused on the peer port).
Keys are written with mode 0600. Nothing is overwritten: a file that exists
already is an error, and nothing is written. When DIR holds a CA (ca.pem and
ca-key.pem) already, it signs the new certificates, so that nodes and clients
can be added later.

Then start each node with --tls-cert DIR/ID.pem --tls-key DIR/ID-key.pem
--tls-ca DIR/ca.pem, and talk to it with raftlock --ca DIR/ca.pem (and --cert
DIR/NAME.pem --key DIR/NAME-key.pem under --client-cert-auth) --addr
https://HOST:PORT.`

// tlsInit runs "raftlock tls init DIR --node ID=HOST... [--client NAME...]".
func (c *cli) tlsInit(fs *flag.FlagSet) runFunc {
	var nodes, clients []string
	fs.Func("node", "a node's certificate, `ID=HOST[+HOST...]` (repeat for each node)", func(v string) error {
		nodes = append(nodes, v)
		return nil
	})
	fs.Func("client", "a client certificate named `NAME` (repeat for more)", func(v string) error {
		clients = append(clients, v)
		return nil
	})
	return func(_ context.Context, args []string) error {
		plan, err := planTLS(args[0], nodes, clients)
		if err != nil {
			return err
		}
		written, err := plan.write()
		if err != nil {
			return err
		}
		for _, f := range written {
			if err := c.printf("%s\n", f); err != nil {
				return err
			}
		}
		return nil
	}
}

// tlsPlan is what tls init is to write.
type tlsPlan struct {
	dir     string
	newCA   bool
	nodes   []tlsNode
	clients []string
}

type tlsNode struct {
	id    string
	hosts []string
}

// planTLS checks tls init's arguments and the files in dir: nothing it
// would write may exist.
func planTLS(dir string, nodes, clients []string) (*tlsPlan, error) {
	const cmd = "tls init"
	p := &tlsPlan{dir: dir}
	if len(nodes) == 0 && len(clients) == 0 {
		return nil, usagef(cmd, "give at least one --node ID=HOST or --client NAME")
	}
	names := map[string]bool{"ca": true, "ca-key": true}
	name := func(flag, n string) error {
		if err := sequencer.CheckText(flag, n, 1, 64); err != nil || strings.ContainsAny(n, `/\`) || n == "." || n == ".." {
			return usagef(cmd, "%s %q: want a name for files (no slash)", flag, n)
		}
		if names[n] || names[n+"-key"] || strings.HasSuffix(n, "-key") {
			return usagef(cmd, "%s %q: a name taken already (names are unique, not ca, not ending in -key)", flag, n)
		}
		names[n] = true
		return nil
	}
	for _, v := range nodes {
		id, hosts, ok := strings.Cut(v, "=")
		if !ok || hosts == "" {
			return nil, usagef(cmd, "--node %q: want ID=HOST (e.g. n1=10.0.0.1)", v)
		}
		if err := name("--node", id); err != nil {
			return nil, err
		}
		n := tlsNode{id: id}
		for _, h := range strings.Split(hosts, "+") {
			if h = strings.TrimSpace(h); h == "" || (net.ParseIP(h) == nil && strings.ContainsAny(h, ":/ ")) {
				return nil, usagef(cmd, "--node %q: want IP addresses or DNS names (no ports), separated by +", v)
			}
			n.hosts = append(n.hosts, h)
		}
		p.nodes = append(p.nodes, n)
	}
	for _, n := range clients {
		if err := name("--client", n); err != nil {
			return nil, err
		}
		p.clients = append(p.clients, n)
	}
	_, errCert := os.Stat(filepath.Join(dir, "ca.pem"))
	_, errKey := os.Stat(filepath.Join(dir, "ca-key.pem"))
	switch {
	case errCert == nil && errKey == nil:
	case errors.Is(errCert, fs.ErrNotExist) && errors.Is(errKey, fs.ErrNotExist):
		p.newCA = true
	default:
		return nil, fmt.Errorf("%s: %s holds one of ca.pem and ca-key.pem but not the other", cmd, dir)
	}
	for _, f := range p.files() {
		if _, err := os.Lstat(f); err == nil {
			return nil, &codeError{code: "already_exists", err: fmt.Errorf("%s: %s exists already; nothing written (tls init never overwrites a file)", cmd, f)}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
	}
	return p, nil
}

// files are the files the plan writes, in order.
func (p *tlsPlan) files() []string {
	var out []string
	if p.newCA {
		out = append(out, p.path("ca"), p.path("ca-key"))
	}
	for _, n := range p.nodes {
		out = append(out, p.path(n.id), p.path(n.id+"-key"))
	}
	for _, n := range p.clients {
		out = append(out, p.path(n), p.path(n+"-key"))
	}
	return out
}

func (p *tlsPlan) path(name string) string { return filepath.Join(p.dir, name+".pem") }

// write makes the CA (or loads DIR's) and the certificates, and writes
// them, each file created anew (O_EXCL), keys 0600; it returns the files.
func (p *tlsPlan) write() ([]string, error) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls init: %w", err)
	}
	ca, err := p.ca()
	if err != nil {
		return nil, err
	}
	type file struct {
		name string
		data []byte
		mode os.FileMode
	}
	var files []file
	add := func(name string, cert, key []byte) {
		files = append(files, file{p.path(name), cert, 0o644}, file{p.path(name + "-key"), key, 0o600})
	}
	if p.newCA {
		key, err := x509.MarshalPKCS8PrivateKey(ca.Key)
		if err != nil {
			return nil, fmt.Errorf("tls init: CA key: %w", err)
		}
		add("ca", ca.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}))
	}
	for _, n := range p.nodes {
		cert, key, err := ca.IssueNode(n.id, n.hosts, certValidity)
		if err != nil {
			return nil, fmt.Errorf("tls init: %w", err)
		}
		add(n.id, cert, key)
	}
	for _, n := range p.clients {
		cert, key, err := ca.IssueClient(n, certValidity)
		if err != nil {
			return nil, fmt.Errorf("tls init: %w", err)
		}
		add(n, cert, key)
	}
	var written []string
	for _, f := range files {
		w, err := os.OpenFile(f.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err == nil {
			_, err = w.Write(f.data)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return written, fmt.Errorf("tls init: %w (written before: %q)", err, written)
		}
		written = append(written, f.name)
	}
	return written, nil
}

// ca returns a new CA, or the one in DIR.
func (p *tlsPlan) ca() (*tlsconf.CA, error) {
	if p.newCA {
		ca, err := tlsconf.NewCA("raftlock CA", certValidity)
		if err != nil {
			return nil, fmt.Errorf("tls init: %w", err)
		}
		return ca, nil
	}
	pair, err := tls.LoadX509KeyPair(p.path("ca"), p.path("ca-key"))
	if err != nil {
		return nil, fmt.Errorf("tls init: the CA in %s: %w", p.dir, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls init: the CA in %s: %w", p.dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("tls init: %s is not an ECDSA CA certificate and key", p.path("ca"))
	}
	return &tlsconf.CA{Cert: cert, Key: key}, nil
}
