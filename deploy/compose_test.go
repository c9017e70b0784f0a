package deploy

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// composeFile is the part of the Compose specification the file uses,
// decoded strictly, so a misspelt key (depend_on) fails the test instead
// of being ignored as Compose would ignore an x- extension.
type composeFile struct {
	Name       string                    `yaml:"name"`
	XGatehouse any                       `yaml:"x-gatehouse"` // the replicas' shared part, merged into each
	Services   map[string]composeService `yaml:"services"`
	Volumes    map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context string            `yaml:"context"`
		Args    map[string]string `yaml:"args"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Restart     string            `yaml:"restart"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		StartPeriod string   `yaml:"start_period"`
		Retries     int      `yaml:"retries"`
	} `yaml:"healthcheck"`
	Networks map[string]struct {
		Aliases []string `yaml:"aliases"`
	} `yaml:"networks"`
	StopGracePeriod string `yaml:"stop_grace_period"`
	ReadOnly        bool   `yaml:"read_only"`
}

// mounts maps each bind or volume target of the service to its source.
func (s composeService) mounts() map[string]string {
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			m[parts[1]] = parts[0]
		}
	}
	return m
}

// interpolate expands the two forms of Compose variable the file uses,
// ${VAR} and ${VAR:-default}, from env (.env), and $$. Any other form
// is an error: this test would not know what it means.
func interpolate(s string, env map[string]string) (string, error) {
	var err error
	ref := regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)((:-)([^}]*))?\}|\$\{[^}]*\}|\$[A-Za-z_]`)
	out := ref.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := ref.FindStringSubmatch(m)
		if sub[1] == "" {
			err = fmt.Errorf("%q: only ${VAR} and ${VAR:-default} are understood here", m)
			return m
		}
		if v := env[sub[1]]; v != "" || (sub[3] == "" && hasKey(env, sub[1])) {
			return v
		}
		if sub[3] == "" {
			err = fmt.Errorf("%q: %s is not set in .env", m, sub[1])
		}
		return sub[4]
	})
	return out, err
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// dotenv reads KEY=VALUE lines, as Compose reads .env.
func dotenv(text string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return env
}

func TestInterpolate(t *testing.T) {
	env := map[string]string{"A": "a", "EMPTY": ""}
	for in, want := range map[string]string{
		"x${A}y": "xay", "${B:-dflt}": "dflt", "${A:-dflt}": "a", "${EMPTY:-dflt}": "dflt", "${EMPTY}": "", "$$A": "$A", "plain": "plain",
	} {
		if got, err := interpolate(in, env); err != nil || got != want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"${B}", "${A:?required}", "${A-x}", "$A"} {
		if _, err := interpolate(bad, env); err == nil {
			t.Errorf("interpolate(%q): no error", bad)
		}
	}
}

// TestCompose holds deploy/compose to what it promises: two gatehouse
// replicas of the image behind one network alias, Redis and PostgreSQL 16
// with pgvector, every service health-checked and started in order, data
// in volumes, and a cluster-mode config that passes gatehouse's validation
// with the environment .env.example gives the replicas.
func TestCompose(t *testing.T) {
	const dir = "deploy/compose"
	var f composeFile
	if err := yaml.UnmarshalWithOptions([]byte(readFile(t, dir+"/docker-compose.yml")), &f, yaml.Strict()); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	env := dotenv(readFile(t, dir+"/.env.example"))
	img := readDockerfile(t)
	imgEnv := envOf(t, img.final)
	volume := img.final.one(t, "VOLUME").args

	var replicas []string
	for name, s := range f.Services {
		if s.Build != nil && filepath.Clean(filepath.Join(dir, s.Build.Context)) == "." {
			replicas = append(replicas, name)
		}
		if len(s.Profiles) > 0 {
			continue // started only on request (the client)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("service %s has no exec-form health check", name)
		}
		for target, src := range s.mounts() {
			if !strings.HasPrefix(src, ".") {
				if _, ok := f.Volumes[src]; !ok {
					t.Errorf("service %s mounts volume %s at %s, which the file does not declare", name, src, target)
				}
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %s beyond loopback: a quick start with demo keys must not", name, p)
			}
		}
	}
	slices.Sort(replicas)
	if len(replicas) < 2 {
		t.Fatalf("gatehouse replicas built from the repository: %v, want at least 2", replicas)
	}

	redis, pg := f.Services["redis"], f.Services["postgres"]
	if pg.Image != "pgvector/pgvector:pg16" {
		t.Errorf("postgres image %q, want pgvector/pgvector:pg16", pg.Image)
	}
	if pg.mounts()["/var/lib/postgresql/data"] == "" {
		t.Error("PostgreSQL's data is not in a volume")
	}
	if redis.mounts()["/data"] == "" || !slices.Contains(redis.Command, "--appendonly") {
		t.Error("Redis does not persist to a volume (--appendonly yes, /data): budgets' counters would not survive a restart")
	}

	var aliases [][]string
	var cfgFiles []string
	for _, name := range replicas {
		s := f.Services[name]
		for _, dep := range []string{"redis", "postgres"} {
			if c := s.DependsOn[dep].Condition; c != "service_healthy" {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, dep, c)
			}
		}
		if want := []string{"CMD", img.binary, "healthcheck"}; !slices.Equal(s.Healthcheck.Test, want) {
			t.Errorf("%s health check %v, want %v", name, s.Healthcheck.Test, want)
		}
		var a []string
		for _, n := range s.Networks {
			a = append(a, n.Aliases...)
		}
		aliases = append(aliases, a)
		cfgPath := s.Environment["GATEHOUSE_CONFIG"]
		if cfgPath == "" {
			cfgPath = imgEnv["GATEHOUSE_CONFIG"]
		}
		src, ok := s.mounts()[cfgPath]
		if !ok {
			t.Fatalf("%s reads its config from %s, which it does not mount", name, cfgPath)
		}
		cfgFiles = append(cfgFiles, src)
		if s.mounts()[volume] == "" {
			t.Errorf("%s has no volume at the image's %s", name, volume)
		}

		// The config as this replica sees it.
		repEnv := map[string]string{}
		for k, v := range s.Environment {
			var err error
			if repEnv[k], err = interpolate(v, env); err != nil {
				t.Errorf("%s: environment %s: %v", name, k, err)
			}
		}
		delete(repEnv, "GATEHOUSE_CONFIG")
		cfg := checkConfig(t, filepath.Join(root, dir, src), repEnv)
		if !cfg.Cluster() {
			t.Errorf("%s's config is not in cluster mode (storage.redis and storage.postgres)", name)
		}
		checkStoreURL(t, cfg.Storage.Redis, "redis", f.Services)
		pgURL := checkStoreURL(t, cfg.Storage.Postgres, "postgres", f.Services)
		if pgURL != nil {
			pw, _ := pgURL.User.Password()
			want, _ := interpolate(pg.Environment["POSTGRES_PASSWORD"], env)
			if pgURL.User.Username() != pg.Environment["POSTGRES_USER"] || pw != want || strings.TrimPrefix(pgURL.Path, "/") != pg.Environment["POSTGRES_DB"] {
				t.Errorf("%s connects to PostgreSQL as %s/%s, not the user and database the postgres service creates", name, pgURL.User.Username(), pgURL.Path)
			}
		}
		if len(cfg.Keys) == 0 || cfg.Keys[0].Key != env["GATEHOUSE_DEMO_KEY"] {
			t.Errorf("%s: the quick-start key is not .env's GATEHOUSE_DEMO_KEY", name)
		}
		if !strings.HasPrefix(cfg.Usage.SpillDir, volume+"/") {
			t.Errorf("%s spills usage records to %s, outside its volume %s (the root is read-only)", name, cfg.Usage.SpillDir, volume)
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || grace <= cfg.Server.ShutdownGrace.D() {
			t.Errorf("%s: stop_grace_period %q is not above server.shutdown_grace %v: docker stop would kill streams still draining", name, s.StopGracePeriod, cfg.Server.ShutdownGrace.D())
		}
	}
	shared := aliases[0]
	for _, a := range aliases[1:] {
		shared = slices.DeleteFunc(slices.Clone(shared), func(s string) bool { return !slices.Contains(a, s) })
	}
	if len(shared) == 0 {
		t.Errorf("the replicas %v share no network alias: nothing round-robins between them", replicas)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(cfgFiles)))) != 1 {
		t.Errorf("the replicas mount different configs %v", cfgFiles)
	}

	// Where Docker Compose is installed, it has the last word on the file.
	if err := exec.Command("docker", "compose", "version").Run(); err != nil {
		t.Log("docker compose is not installed: checked the file structurally only")
		return
	}
	out, err := exec.Command("docker", "compose", "-f", filepath.Join(root, dir, "docker-compose.yml"),
		"--env-file", filepath.Join(root, dir, ".env.example"), "config", "--quiet").CombinedOutput()
	if err != nil {
		t.Errorf("docker compose config: %v\n%s", err, out)
	}
}

// checkStoreURL wants raw to be a URL whose host is a service of the file
// (the name Docker's DNS resolves), and returns it.
func checkStoreURL(t *testing.T, raw, service string, services map[string]composeService) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Errorf("%s URL: %v", service, err)
		return nil
	}
	if _, ok := services[u.Hostname()]; !ok || u.Hostname() != service {
		t.Errorf("the %s URL's host is %q, not the %s service", service, u.Hostname(), service)
	}
	return u
}
