package deploy

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The version and commit the test builds stamp, to see them come back
// from gatehouse --version.
const (
	testVersion = "v0.0.0-deploytest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// image is what the Dockerfile promises, read from it once.
type image struct {
	build, final stage
	binary       string // the path ENTRYPOINT runs, e.g. /gatehouse
}

func readDockerfile(t *testing.T) image {
	t.Helper()
	stages, err := parseDockerfile(readFile(t, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	img := image{final: stages[len(stages)-1]}
	for _, s := range stages[:len(stages)-1] {
		if strings.HasSuffix(s.from, " AS build") {
			img.build = s
		}
	}
	if img.build.from == "" {
		t.Fatal("Dockerfile has no stage named build")
	}
	img.binary = execForm(t, img.final.one(t, "ENTRYPOINT"))[0]
	return img
}

var (
	builtOnce sync.Once
	builtBin  string
	builtErr  error
)

// imageBinary builds gatehouse exactly as the Dockerfile's build stage
// does: from a copy of the build context (what .dockerignore lets
// through), by running the RUN instruction that makes the binary with the
// build arguments a release passes. Built once per test run; other tests
// (systemd) use it too.
func imageBinary(t *testing.T) string {
	t.Helper()
	img := readDockerfile(t)
	builtOnce.Do(func() { builtBin, builtErr = buildLikeDockerfile(t, img) })
	if builtErr != nil {
		t.Fatalf("build as the Dockerfile does: %v", builtErr)
	}
	return builtBin
}

func buildLikeDockerfile(t *testing.T, img image) (string, error) {
	src := copies(t, img.final)[img.binary] // build:/out/gatehouse
	stageName, built, ok := strings.Cut(src, ":")
	if !ok || stageName != "build" {
		return "", errors.New("the final stage does not copy its ENTRYPOINT binary from the build stage")
	}
	var run *instruction
	for _, in := range img.build.all("RUN") {
		if strings.Contains(in.args, "scripts/build "+built) {
			run = &in
		}
	}
	if run == nil {
		return "", errors.New("no RUN in the build stage makes " + built + " with scripts/build")
	}
	if w := img.build.all("WORKDIR"); len(w) != 1 || w[0].args != "/src" {
		return "", errors.New("the build stage must build in WORKDIR /src, where COPY . . puts the context")
	}
	ctxDir := buildContext(t)
	out, err := os.MkdirTemp("", "gatehouse-image")
	if err != nil {
		return "", err
	}
	outDir := filepath.Dir(built) // /out
	script := strings.ReplaceAll(run.args, outDir+"/", out+"/")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "TARGETOS="+runtime.GOOS, "TARGETARCH="+runtime.GOARCH,
		"VERSION="+testVersion, "COMMIT="+testCommit)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(err.Error() + ":\n" + string(b))
	}
	return filepath.Join(out, filepath.Base(built)), nil
}

// TestDockerImage checks the image two ways. With a container engine
// that answers (docker info, or $DOCKER), it builds the image and runs it:
// healthy, a chat through the demo model, a clean stop. Always, it
// builds the binary as the Dockerfile does and holds the Dockerfile's
// instructions to it: static, non-root, the health check a real
// subcommand that passes against the running binary and fails once it
// stops, the exposed port the config's.
func TestDockerImage(t *testing.T) {
	docker := os.Getenv("DOCKER")
	if docker == "" {
		docker = "docker"
	}
	if out, err := exec.Command(docker, "info").CombinedOutput(); err == nil {
		t.Logf("container engine: %s answers; building and running the image", docker)
		t.Run("container", func(t *testing.T) { testContainer(t, docker) })
	} else {
		last := strings.TrimSpace(string(out))
		if i := strings.LastIndex(last, "\n"); i >= 0 {
			last = last[i+1:]
		}
		t.Logf("container engine: %s info failed (%v: %s); checking the binary the Dockerfile builds instead", docker, err, last)
	}
	t.Run("binary", testImageBinary)
}

func testImageBinary(t *testing.T) {
	img := readDockerfile(t)
	if !strings.HasPrefix(img.final.from, "gcr.io/distroless/static") && img.final.from != "scratch" {
		t.Errorf("the runtime image is %q, want distroless static or scratch", img.final.from)
	}
	bin := imageBinary(t)
	checkStatic(t, bin)

	user := img.final.one(t, "USER").args
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %s: want a numeric non-root uid (Kubernetes' runAsNonRoot can only check a number)", user)
	}

	files := copies(t, img.final)
	env := envOf(t, img.final)
	cfgPath, ok := files[env["GATEHOUSE_CONFIG"]]
	if !ok || strings.Contains(cfgPath, ":") {
		t.Fatalf("GATEHOUSE_CONFIG=%s is not a file the image copies from the context", env["GATEHOUSE_CONFIG"])
	}
	cfg := checkConfig(t, filepath.Join(root, cfgPath), nil)
	port, err := portOf(cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Listen, "0.0.0.0:") && !strings.HasPrefix(cfg.Listen, ":") {
		t.Errorf("the image's config listens on %s: a published port reaches only a wildcard address", cfg.Listen)
	}
	if expose := img.final.one(t, "EXPOSE").args; expose != port && expose != port+"/tcp" {
		t.Errorf("EXPOSE %s, but the image's config listens on port %s", expose, port)
	}
	workdir, volume := img.final.one(t, "WORKDIR").args, img.final.one(t, "VOLUME").args
	db := cfg.Storage.SQLite
	if !filepath.IsAbs(db) {
		db = filepath.Join(workdir, db)
	}
	if !strings.HasPrefix(db, volume+"/") {
		t.Errorf("the SQLite file %s is not in the volume %s", db, volume)
	}
	owned := false
	for _, in := range img.final.all("COPY") {
		owned = owned || (strings.HasSuffix(in.args, " "+volume) && strings.Contains(in.args, "--chown="+user+" "))
	}
	if !owned {
		t.Errorf("VOLUME %s: want it made by a COPY --chown=%s, or the non-root user cannot write the database", volume, user)
	}

	hc := img.final.one(t, "HEALTHCHECK").args
	_, hcCmd, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s: no CMD", hc)
	}
	health := execForm(t, instruction{cmd: "HEALTHCHECK", args: hcCmd, line: img.final.one(t, "HEALTHCHECK").line})
	if health[0] != img.binary {
		t.Fatalf("HEALTHCHECK runs %s, not the image's binary %s", health[0], img.binary)
	}
	args := execForm(t, img.final.one(t, "CMD"))

	// Run the binary as the container does: its working directory the
	// volume, its environment the image's, only the listen address moved
	// off port 8080 so parallel test runs on one machine do not collide.
	data := t.TempDir()
	addr := freeAddr(t)
	runEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + data, "GATEHOUSE_LISTEN=" + addr}
	for k, v := range env {
		if k == "GATEHOUSE_CONFIG" {
			v, _ = filepath.Abs(filepath.Join(root, cfgPath))
		}
		runEnv = append(runEnv, k+"="+v)
	}
	command := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Dir, c.Env = data, runEnv
		return c
	}
	healthy := func() bool { return command(health[1:]...).Run() == nil }

	out, err := command("--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), testVersion) || !strings.Contains(string(out), testCommit) {
		t.Errorf("gatehouse --version = %q (%v), want the stamped %s and %s", out, err, testVersion, testCommit)
	}
	if healthy() {
		t.Fatalf("the health check passes before gatehouse runs: is something else on %s?", addr)
	}
	var logs bytes.Buffer
	srv := command(args...)
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	defer func() {
		_ = srv.Process.Kill()
	}()
	if !waitFor(20*time.Second, healthy) {
		t.Fatalf("the HEALTHCHECK command never passed; gatehouse said:\n%s", logs.String())
	}
	chat(t, "http://"+addr, "gh-demo-key")
	if rel, err := filepath.Rel(workdir, db); err != nil {
		t.Error(err)
	} else if _, err := os.Stat(filepath.Join(data, rel)); err != nil {
		t.Errorf("the SQLite file is not in the working directory (the volume): %v", err)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("gatehouse after SIGTERM (the STOPSIGNAL): %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("gatehouse did not stop on SIGTERM:\n%s", logs.String())
	}
	if sig := img.final.one(t, "STOPSIGNAL").args; sig != "SIGTERM" {
		t.Errorf("STOPSIGNAL %s: gatehouse drains on SIGTERM", sig)
	}
	err = command(health[1:]...).Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the health check of a stopped gateway: %v, want exit status 1", err)
	}
}

// checkStatic fails unless bin is a static executable built with cgo off
// and trimmed paths: no ELF interpreter, no shared libraries.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	for _, want := range []string{"\tbuild\tCGO_ENABLED=0\n", "\tbuild\t-trimpath=true\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go version -m has no %q:\n%s", strings.TrimSpace(want), out)
		}
	}
	f, err := elf.Open(bin)
	if err != nil {
		if runtime.GOOS == "linux" {
			t.Fatalf("read the ELF binary: %v", err)
		}
		return // a darwin host builds a Mach-O binary: the image's is linux's
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
}

// testContainer builds the image and runs it under a container engine.
func testContainer(t *testing.T, docker string) {
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(docker, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", docker, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tag := "gatehouse-deploytest:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run("build", "--build-arg", "VERSION="+testVersion, "--build-arg", "COMMIT="+testCommit, "-t", tag, root)
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", tag).Run() })

	if v := run("run", "--rm", tag, "--version"); !strings.Contains(v, testVersion) || !strings.Contains(v, testCommit) {
		t.Errorf("the image's gatehouse --version = %q, want %s and %s", v, testVersion, testCommit)
	}
	if user := run("image", "inspect", "-f", "{{.Config.User}}", tag); user == "" || user == "0" || strings.HasPrefix(user, "root") {
		t.Errorf("the image runs as %q, want a non-root user", user)
	}
	id := run("run", "-d", "-p", "127.0.0.1::8080", tag)
	t.Cleanup(func() { _ = exec.Command(docker, "rm", "-f", id).Run() })
	status := ""
	if !waitFor(90*time.Second, func() bool {
		status = run("inspect", "-f", "{{.State.Health.Status}}", id)
		return status == "healthy"
	}) {
		logs, _ := exec.Command(docker, "logs", id).CombinedOutput()
		t.Fatalf("the container's health is %q after 90s; its logs:\n%s", status, logs)
	}
	hostPort := run("port", id, "8080/tcp")
	if i := strings.Index(hostPort, "\n"); i >= 0 {
		hostPort = hostPort[:i]
	}
	chat(t, "http://"+hostPort, "gh-demo-key")
	run("stop", "-t", "40", id)
	if code := run("inspect", "-f", "{{.State.ExitCode}}", id); code != "0" {
		logs, _ := exec.Command(docker, "logs", id).CombinedOutput()
		t.Errorf("the container exited with %s after docker stop, want 0 (a drained shutdown); its logs:\n%s", code, logs)
	}
}
