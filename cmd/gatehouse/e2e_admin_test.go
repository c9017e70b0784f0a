package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"gatehouse/internal/store/postgres/pgtest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
)

const testAdminKey = "gh-admin-e2e-secret"

// cliRun runs the real gatehouse binary with the admin address and key
// in the environment, as a script would.
func cliRun(t *testing.T, addr string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(gatehouseBinary(t), args...)
	cmd.Env = append(os.Environ(), "GATEHOUSE_ADDR="+addr, "GATEHOUSE_ADMIN_KEY="+testAdminKey)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// chatStatus makes one chat completion with openai-go and returns 200 or
// the status of the API error.
func chatStatus(t *testing.T, base, key string) int {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), userMessage("hello"))
	if err == nil {
		return 200
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("chat: %v", err)
	}
	return apiErr.StatusCode
}

// waitRefused polls until the key is refused with 401 and fails the test
// if that takes more than a second from now.
func waitRefused(t *testing.T, base, key string) {
	t.Helper()
	start := time.Now()
	for {
		st := chatStatus(t, base, key)
		if st == http.StatusUnauthorized {
			t.Logf("revoked key refused after %v", time.Since(start).Round(time.Millisecond))
			return
		}
		if st != 200 {
			t.Fatalf("revoked key: status %d, want 401", st)
		}
		if time.Since(start) > time.Second {
			t.Fatal("the revoked key still works after a second")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCLIKeyLifecycle(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "admin_key: "+testAdminKey+"\n"))

	// The config's project exists read-only; keys may be created in it.
	out, stderr, err := cliRun(t, gw.URL, "keys", "create", "--project", "qa", "--name", "ci", "--rpm", "60",
		"--budget", "10/month", "--models", "chat,embed", "--expires", "30d", "--label", "team=a,b", "--json")
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, stderr)
	}
	var created struct {
		ID, Key, Status string
		RPM             int
		Labels          map[string]string
		Budget          struct{ USD float64 }
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("keys create --json: %v\n%s", err, out)
	}
	if !strings.HasPrefix(created.Key, "gh-") || created.RPM != 60 || created.Budget.USD != 10 || created.Labels["team"] != "a,b" {
		t.Fatalf("created %+v", created)
	}
	if strings.Contains(gw.Logs.String(), created.Key) {
		t.Fatal("the secret is in the gateway log")
	}

	if st := chatStatus(t, gw.URL, created.Key); st != 200 {
		t.Fatalf("new key: status %d", st)
	}

	// People get a table.
	out, stderr, err = cliRun(t, gw.URL, "keys", "list", "--project", "qa")
	if err != nil {
		t.Fatalf("keys list: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "ID ") || !strings.Contains(out, created.ID) || !strings.Contains(out, "static:tester") ||
		!strings.Contains(out, "$10/month") {
		t.Fatalf("keys list:\n%s", out)
	}
	if strings.Contains(out, created.Key) {
		t.Fatal("keys list shows the secret")
	}
	out, stderr, err = cliRun(t, gw.URL, "keys", "list", "--search", "TESTER")
	if err != nil {
		t.Fatalf("keys list --search: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "static:tester") || strings.Contains(out, created.ID) {
		t.Fatalf("keys list --search TESTER:\n%s", out)
	}

	if _, stderr, err := cliRun(t, gw.URL, "keys", "revoke", created.ID); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, stderr)
	}
	waitRefused(t, gw.URL, created.Key)

	// The static key of the config is read-only and keeps working.
	_, stderr, err = cliRun(t, gw.URL, "keys", "revoke", "static:tester")
	if err == nil || !strings.Contains(stderr, "403") || !strings.Contains(stderr, "config file") {
		t.Fatalf("revoking a static key: err %v, stderr %q", err, stderr)
	}
	if st := chatStatus(t, gw.URL, clientKey); st != 200 {
		t.Fatalf("static key: status %d", st)
	}
}

func TestCLIErrors(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "admin_key: "+testAdminKey+"\n"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--project", "nope"}, "no project"},
		{[]string{"keys", "create", "--project", "qa", "--rpm=-1"}, "rpm"},
		{[]string{"keys", "create", "--project", "qa", "--budget", "10/year"}, "period"},
		{[]string{"keys", "create", "--project", "qa", "--budget", "ten"}, "--budget"},
		{[]string{"keys", "get", "key_nope"}, "404"},
		{[]string{"projects", "delete", "qa"}, "403"},
		{[]string{"customers", "create", "--project", "qa", "--external-id", "u", "--on-exceed", "downgrade"}, "downgrade_model"},
	} {
		out, stderr, err := cliRun(t, gw.URL, c.args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: err %v, stdout %q, stderr %q; want a failure mentioning %q", c.args, err, out, stderr, c.want)
		}
	}
	// A wrong admin key, and no gateway at all.
	cmd := exec.Command(gatehouseBinary(t), "projects", "list", "--addr", gw.URL, "--admin-key", "wrong")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("wrong admin key: %v %s", err, out)
	}
	if _, stderr, err := cliRun(t, "http://127.0.0.1:1", "projects", "list"); err == nil || !strings.Contains(stderr, "cannot reach") {
		t.Errorf("no gateway: %v %s", err, stderr)
	}
	// And a round of the other commands, in-process.
	ctx := context.Background()
	f := adminFlags{Addr: gw.URL, AdminKey: testAdminKey}
	var buf bytes.Buffer
	rpm := 5
	if err := (&projectsCreateCmd{adminFlags: f, Name: "shop", projectSettings: projectSettings{RPM: &rpm}}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if err := (&customersCreateCmd{adminFlags: f, Project: "shop", ExternalID: "user-9"}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := (&customersListCmd{adminFlags: f, Project: "shop"}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "user-9") || !strings.Contains(buf.String(), "EXTERNAL ID") {
		t.Fatalf("customers list:\n%s", buf.String())
	}
	// keys create and update, in-process: update changes only what is given.
	buf.Reset()
	name, keyRPM := "ci", 7
	if err := (&keysCreateCmd{adminFlags: f, Project: "shop", keySettings: keySettings{Name: &name, RPM: &keyRPM}}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`key_[0-9a-z]+`).FindString(buf.String())
	if id == "" {
		t.Fatalf("keys create printed no id:\n%s", buf.String())
	}
	buf.Reset()
	tpm, budget, noCache := 900, "3/day", true
	if err := (&keysUpdateCmd{adminFlags: f, ID: id, keySettings: keySettings{TPM: &tpm, Budget: &budget, NoCache: &noCache}}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tpm", "900", "rpm", "7", "ci", "day", "no_cache", "true"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("keys update shows no %q:\n%s", want, buf.String())
		}
	}
	// --model-limit, repeatable; keys get shows them as given.
	buf.Reset()
	if err := (&keysUpdateCmd{adminFlags: f, ID: id, keySettings: keySettings{ModelLimit: []string{"chat=3/0", "embed=1/500"}}}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := (&keysGetCmd{adminFlags: f, ID: id}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "chat=3/0,embed=1/500") {
		t.Fatalf("keys get shows no model limits:\n%s", buf.String())
	}
	if _, err := parseModelLimits([]string{"chat=x/1"}); err == nil {
		t.Fatal("--model-limit chat=x/1 accepted")
	}
	// prices set, list, delete.
	buf.Reset()
	cached := 0.5
	if err := (&pricesSetCmd{adminFlags: f, Model: "gpt-4o", Input: 2, Output: 8, CachedInput: &cached}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := (&pricesListCmd{adminFlags: f}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "gpt-4o") || !strings.Contains(buf.String(), "store") {
		t.Fatalf("prices list:\n%s", buf.String())
	}
	if err := (&pricesDeleteCmd{adminFlags: f, Model: "gpt-4o"}).run(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	none, on, ttl := "none", true, 120
	if err := (&projectsUpdateCmd{adminFlags: f, Project: "shop", projectSettings: projectSettings{Budget: &none, Cache: &on, CacheTTL: &ttl}}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "ttl_seconds") || !strings.Contains(buf.String(), "120") {
		t.Fatalf("projects update --cache --cache-ttl shows:\n%s", buf.String())
	}
	buf.Reset()
	if err := (&projectsListCmd{adminFlags: f}).run(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "shop") || !strings.Contains(buf.String(), "qa") {
		t.Fatalf("projects list:\n%s", buf.String())
	}
}

func TestAdminDisabledWithoutKey(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	req, _ := http.NewRequest(http.MethodGet, gw.URL+"/admin/keys", nil)
	req.Header.Set("Authorization", "Bearer anything")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
	if !strings.Contains(gw.Logs.String(), "admin API disabled") {
		t.Fatal("no startup line saying the admin API is off")
	}
}

// clusterDSN is a PostgreSQL DSN on a new schema of the test database,
// dropped when the test ends.
func clusterDSN(t *testing.T) (pg, redis string) {
	t.Helper()
	base, redis := os.Getenv("GATEHOUSE_TEST_POSTGRES"), os.Getenv("GATEHOUSE_TEST_REDIS")
	if base == "" || redis == "" {
		t.Fatal("GATEHOUSE_TEST_POSTGRES and GATEHOUSE_TEST_REDIS must be set: this test needs the PostgreSQL and Redis " +
			"servers that `make test` starts; by hand: eval \"$(scripts/test-services start)\" and run go test again")
	}
	return pgtest.DSN(t, "gh_e2e_"), redis
}

// TestClusterRevocation runs two gatehouse processes on one PostgreSQL
// and Redis: a key made on A works on B, and revoking it on A refuses it
// on B within a second.
func TestClusterRevocation(t *testing.T) {
	pg, redis := clusterDSN(t)
	up := startUpstream(t, mockllm.Options{})
	cfg := baseConfig(up, "admin_key: "+testAdminKey+"\nstorage:\n  postgres: \""+pg+"\"\n  redis: \""+redis+"\"\n")
	a, _ := startProcess(t, cfg)
	b, _ := startProcess(t, cfg)
	aURL, bURL := "http://"+a.addr, "http://"+b.addr

	_, stderr, err := cliRun(t, aURL, "projects", "create", "team-x", "--rpm", "100", "--json")
	if err != nil {
		t.Fatalf("projects create on A: %v\n%s", err, stderr)
	}
	out, stderr, err := cliRun(t, aURL, "keys", "create", "--project", "team-x", "--json")
	if err != nil {
		t.Fatalf("keys create on A: %v\n%s\n%s", err, stderr, out)
	}
	var k struct{ ID, Key string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	// Used on B first, so B has it cached when it is revoked.
	for range 3 {
		if st := chatStatus(t, bURL, k.Key); st != 200 {
			t.Fatalf("key on B: status %d (logs: %s)", st, b.logs.String())
		}
	}
	// B lists what A created: one store.
	out, stderr, err = cliRun(t, bURL, "keys", "list", "--project", "team-x", "--json")
	if err != nil || !strings.Contains(out, k.ID) {
		t.Fatalf("keys list on B: %v %s %s", err, out, stderr)
	}
	if _, stderr, err := cliRun(t, aURL, "keys", "revoke", k.ID); err != nil {
		t.Fatalf("keys revoke on A: %v\n%s", err, stderr)
	}
	waitRefused(t, bURL, k.Key)
	waitRefused(t, aURL, k.Key)

	// A key that expires: refused on both replicas within a second of
	// its expires_at, though each has it cached as active.
	// Whole seconds: the CLI sends expires_at to the second.
	expires := time.Now().Add(4 * time.Second).UTC().Truncate(time.Second)
	// A project of its own, without team-x's rate the polling would hit.
	if _, stderr, err := cliRun(t, aURL, "projects", "create", "team-y", "--json"); err != nil {
		t.Fatalf("projects create on A: %v\n%s", err, stderr)
	}
	out, stderr, err = cliRun(t, aURL, "keys", "create", "--project", "team-y", "--expires", expires.Format(time.RFC3339), "--json")
	if err != nil {
		t.Fatalf("keys create on A: %v\n%s\n%s", err, stderr, out)
	}
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{aURL, bURL} {
		if st := chatStatus(t, u, k.Key); st != 200 {
			t.Fatalf("expiring key on %s before it expires: status %d", u, st)
		}
	}
	waitExpired(t, k.Key, expires, aURL, bURL)
}

// waitExpired polls each gateway with a key that expires at expires
// until it is refused, and fails if one still serves it a second after.
func waitExpired(t *testing.T, key string, expires time.Time, bases ...string) {
	t.Helper()
	for _, base := range bases {
		for {
			st := chatStatus(t, base, key)
			now := time.Now()
			if st == http.StatusUnauthorized {
				if now.Before(expires) {
					t.Fatalf("%s refused the key %v before it expires", base, expires.Sub(now))
				}
				t.Logf("%s: expired key refused %v after expires_at", base, now.Sub(expires).Round(time.Millisecond))
				break
			}
			if st != 200 {
				t.Fatalf("%s: expiring key: status %d", base, st)
			}
			if now.After(expires.Add(time.Second)) {
				t.Fatalf("%s still serves the key a second after it expired", base)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
