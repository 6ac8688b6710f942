package kerberos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: the mechanism
// starts none (gokrb5's Client.Login would).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testFiles writes a krb5.conf naming kdc (host:port) for SAMSA.TEST, and
// a keytab for each principal ("name" -> password), into a new directory.
func testFiles(t *testing.T, kdc string, principals map[string]string) (dir, conf, kt string) {
	t.Helper()
	dir = t.TempDir()
	conf = filepath.Join(dir, "krb5.conf")
	require.NoError(t, os.WriteFile(conf, []byte(krb5ConfText(kdc)), 0o600))
	k := keytab.New()
	for name, pw := range principals {
		require.NoError(t, k.AddEntry(name, testRealm, pw, time.Now(), 1, etypeID.AES256_CTS_HMAC_SHA1_96))
	}
	b, err := k.Marshal()
	require.NoError(t, err)
	kt = filepath.Join(dir, "client.keytab")
	require.NoError(t, os.WriteFile(kt, b, 0o600))
	return dir, conf, kt
}

func krb5ConfText(kdc string) string {
	return `[libdefaults]
  default_realm = ` + testRealm + `
  dns_lookup_kdc = false
  dns_lookup_realm = false
  rdns = false
  dns_canonicalize_hostname = false
  udp_preference_limit = 1
[realms]
  ` + testRealm + ` = {
    kdc = ` + kdc + `
  }
[domain_realm]
  localhost = ` + testRealm + `
`
}

// testKDC is a real MIT Kerberos KDC for SAMSA.TEST on 127.0.0.1, in a
// directory of its own (KRB5_CONFIG and KRB5_KDC_PROFILE point there, so
// /etc is left alone).
type testKDC struct {
	dir           string
	conf          string // krb5.conf
	clientKeytab  string // client@ and renewable@
	serviceKeytab string // kafka/localhost@
	env           []string
	tools         map[string]string // kdcTools' paths
}

// kdcTools are the MIT Kerberos programs startKDC runs (Debian:
// krb5-kdc, krb5-admin-server, krb5-user).
var kdcTools = []string{"krb5kdc", "kdb5_util", "kadmin.local", "kinit"}

// startKDC starts a KDC with the principals kafka/localhost, client and
// renewable (renewable tickets), or skips the test without MIT Kerberos'
// tools; under CI their absence fails it. The KDC is stopped at cleanup.
func startKDC(t *testing.T) *testKDC {
	t.Helper()
	paths := map[string]string{}
	for _, tool := range kdcTools {
		p, err := exec.LookPath(tool)
		if err != nil {
			if p2 := "/usr/sbin/" + tool; fileExists(p2) {
				p, err = p2, nil
			}
		}
		if err != nil {
			msg := fmt.Sprintf("%s not found: install krb5-kdc, krb5-admin-server and krb5-user", tool)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		paths[tool] = p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	k := &testKDC{dir: t.TempDir(), tools: paths}
	k.conf = filepath.Join(k.dir, "krb5.conf")
	kdcConf := filepath.Join(k.dir, "kdc.conf")
	k.clientKeytab = filepath.Join(k.dir, "client.keytab")
	k.serviceKeytab = filepath.Join(k.dir, "kafka.keytab")
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.conf, "KRB5_KDC_PROFILE="+kdcConf)
	require.NoError(t, os.WriteFile(k.conf, []byte(krb5ConfText(fmt.Sprintf("127.0.0.1:%d", port))), 0o600))
	require.NoError(t, os.WriteFile(kdcConf, []byte(fmt.Sprintf(`[kdcdefaults]
  kdc_listen = 127.0.0.1:%[1]d
  kdc_tcp_listen = 127.0.0.1:%[1]d
[realms]
  %[2]s = {
    database_name = %[3]s/principal
    key_stash_file = %[3]s/stash
    acl_file = %[3]s/kadm5.acl
    max_life = 1h
    max_renewable_life = 2h
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }
[logging]
  kdc = FILE:%[3]s/kdc.log
`, port, testRealm, k.dir)), 0o600))

	k.run(t, paths["kdb5_util"], "create", "-s", "-r", testRealm, "-P", "master-"+filepath.Base(k.dir))
	for _, q := range []string{
		"addprinc -randkey kafka/localhost@" + testRealm,
		"addprinc -randkey client@" + testRealm,
		"addprinc -randkey -maxrenewlife \"2 hours\" renewable@" + testRealm,
		"ktadd -k " + k.serviceKeytab + " kafka/localhost@" + testRealm,
		"ktadd -k " + k.clientKeytab + " client@" + testRealm + " renewable@" + testRealm,
	} {
		k.run(t, paths["kadmin.local"], "-q", q)
	}
	cmd := exec.Command(paths["krb5kdc"], "-n", "-P", filepath.Join(k.dir, "kdc.pid"))
	cmd.Env = k.env
	out, err := os.Create(filepath.Join(k.dir, "krb5kdc.out"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = out.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(k.dir, "krb5kdc.out"))
			t.Fatalf("krb5kdc exited: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the KDC does not listen on %d: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return k
}

// run runs one of MIT's tools against the KDC's files.
func (k *testKDC) run(t *testing.T, tool string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", tool, strings.Join(args, " "), out)
}

// kinit writes a ticket cache for principal from the client keytab.
func (k *testKDC) kinit(t *testing.T, cache, principal string, extra ...string) {
	t.Helper()
	args := append([]string{"-k", "-t", k.clientKeytab, "-c", "FILE:" + cache}, extra...)
	k.run(t, k.tools["kinit"], append(args, principal)...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
