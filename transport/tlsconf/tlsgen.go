package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority for one raftlock cluster, as raftlock tls
// init makes it: an ECDSA P-256 key and a self-signed certificate that
// signs the nodes' and the clients' certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA returns a new CA named name, valid for validFor from now.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tls: CA key: %w", err)
	}
	tmpl, err := certTemplate(name, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tls: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tls: CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// CertPEM returns the CA's certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// IssueNode returns the certificate and key (PEM) of node name, valid for
// server and client authentication (the peer port's mutual TLS) at hosts
// (IP addresses or DNS names) and at localhost (127.0.0.1, ::1).
func (ca *CA) IssueNode(name string, hosts []string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	tmpl, err := certTemplate(name, validFor)
	if err != nil {
		return nil, nil, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !ipIn(tmpl.IPAddresses, ip) {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// IssueClient returns the certificate and key (PEM) of client name, valid
// for client authentication only: the API takes it (--client-cert-auth),
// the peer port does not.
func (ca *CA) IssueClient(name string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	tmpl, err := certTemplate(name, validFor)
	if err != nil {
		return nil, nil, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(tmpl)
}

func (ca *CA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: key of %s: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: key of %s: %w", tmpl.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// certTemplate is a certificate named name with a random serial, valid
// from a minute ago (clocks differ a little) for validFor.
func certTemplate(name string, validFor time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("tls: serial: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"raftlock"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validFor),
	}, nil
}

func ipIn(ips []net.IP, ip net.IP) bool {
	for _, x := range ips {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}
