package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// The acl group: bootstrap, and token create, list and delete (a cluster
// run with raftlockd --acl).

const aclBootstrapHelp = `Creates the cluster's management token (rules: admin) and prints its id and
secret. It works once per cluster (later calls: permission_denied), needs no
token, and the secret is shown only this once: keep it (e.g. in
RAFTLOCK_ACL_TOKEN for later commands).

If the management token was lost, a refused bootstrap names the cluster's reset
index N. Whoever can write the data dir of the node that leads allows one more:

  printf '%s %s\n' N "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
    > DATA-DIR/acl-bootstrap-reset
  raftlock acl bootstrap --reset-secret-file DATA-DIR/acl-bootstrap-reset

The secret (16 characters or more) is read from the file's last field and
sent with the request: only whoever wrote the file can use it.`

const aclTokenCreateHelp = `Creates a token with the given rules (admin only) and prints its id and secret,
shown only this once. Rules: read:PREFIX (lock get/list/watch, sequencer
check, leader), write:PREFIX (acquire, release, and read), admin (everything).
An empty PREFIX is every lock. Example:

  raftlock acl token create --name jobs --rule write:jobs/ --rule read:`

func (c *cli) aclBootstrap(fs *flag.FlagSet) runFunc {
	var resetFile string
	fs.StringVar(&resetFile, "reset-secret-file", "", "a `FILE` whose last field is the reset secret (the data dir's acl-bootstrap-reset, or a copy): bootstrap again after the management token was lost")
	return func(ctx context.Context, _ []string) error {
		secret, err := readResetSecret(resetFile)
		if err != nil {
			return err
		}
		get := func(ctx context.Context, cl *client.Client) (api.TokenSecret, error) {
			return cl.ACLBootstrapReset(ctx, secret)
		}
		return show(ctx, c, "acl bootstrap", get, func(t api.TokenSecret) any { return t }, c.printTokenSecret)
	}
}

func (c *cli) aclTokenCreate(fs *flag.FlagSet) runFunc {
	var name string
	var rules []string
	fs.StringVar(&name, "name", "", "the token's descriptive `NAME`")
	fs.Func("rule", "a `RULE`: read:PREFIX, write:PREFIX or admin (repeat for more)", func(v string) error {
		rules = append(rules, v)
		return nil
	})
	return func(ctx context.Context, _ []string) error {
		if len(rules) == 0 {
			return usagef("acl token create", "at least one --rule")
		}
		get := func(ctx context.Context, cl *client.Client) (api.TokenSecret, error) {
			return cl.CreateToken(ctx, api.TokenRequest{Name: name, Rules: rules})
		}
		return show(ctx, c, "acl token create", get, func(t api.TokenSecret) any { return t }, c.printTokenSecret)
	}
}

func (c *cli) aclTokenList(*flag.FlagSet) runFunc {
	return func(ctx context.Context, _ []string) error {
		get := func(ctx context.Context, cl *client.Client) ([]api.TokenInfo, error) { return cl.Tokens(ctx) }
		return show(ctx, c, "acl token list", get,
			func(ts []api.TokenInfo) any { return api.TokensReply{Tokens: ts} }, c.printTokens)
	}
}

func (c *cli) aclTokenDelete(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		get := func(ctx context.Context, cl *client.Client) (api.DeletedReply, error) {
			return api.DeletedReply{Deleted: true}, cl.DeleteToken(ctx, pos[0])
		}
		return show(ctx, c, "acl token delete", get, func(r api.DeletedReply) any { return r },
			func(api.DeletedReply) error { return c.printf("deleted %s\n", pos[0]) })
	}
}

func (c *cli) printTokenSecret(t api.TokenSecret) error {
	return c.printf("id:     %s\nsecret: %s\n", t.ID, t.Secret)
}

func (c *cli) printTokens(ts []api.TokenInfo) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	tw.Write([]byte("ID\tNAME\tRULES\n"))
	for _, t := range ts {
		tw.Write([]byte(t.ID + "\t" + t.Name + "\t" + strings.Join(t.Rules, " ") + "\n"))
	}
	tw.Flush()
	return c.printf("%s", b.String())
}

// readResetSecret returns the reset secret of file: its last field ("":
// no file, a first bootstrap). A file that holds the secret's hash
// cannot give the secret back.
func readResetSecret(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--reset-secret-file: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "", fmt.Errorf("--reset-secret-file %s is empty", file)
	}
	secret := f[len(f)-1]
	if strings.HasPrefix(secret, "sha256:") {
		return "", fmt.Errorf("--reset-secret-file %s holds the secret's hash, not the secret: give a file holding the secret itself", file)
	}
	return secret, nil
}
