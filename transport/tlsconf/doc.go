// Package tlsconf holds raftlock's certificates and TLS configuration: a
// node's TLS identity (TLS, LoadTLS) and the configurations it derives for
// the HTTPS API and the mutual-TLS peer port, a client's configuration
// (ClientConfig), and the small certificate authority of raftlock tls init
// (CA). It imports only the standard library, so that a client-only
// program can use it without linking the server.
package tlsconf
