// This file runs the servers the redis target needs: gatehouse's cluster
// mode is Redis (rate limits, budgets, the cache's hot tier) plus
// PostgreSQL (keys and usage records), so both are started here, on free
// loopback ports, from the machine's own binaries. The harness starts
// them itself so a run measures a known, empty, local Redis, not
// whatever a test or a neighbour left in a shared one.

package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench/internal/proc"
)

// lookRedis finds redis-server or says how to get it.
func lookRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("the redis target needs redis-server on PATH (Debian/Ubuntu: apt-get install redis-server), or leave redis out of -targets")
	}
	return bin, nil
}

// startRedis runs a Redis that keeps nothing on disk.
func startRedis(ctx context.Context, g *proc.Group, name string, o proc.Options, bin string) (addr string, p *proc.Proc, err error) {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return "", nil, err
	}
	addr = ports[0]
	_, port, _ := net.SplitHostPort(addr)
	p, err = g.StartWith(name, o, bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", g.Dir)
	if err != nil {
		return "", nil, err
	}
	return addr, p, p.WaitLog(ctx, "Ready to accept connections", readyTimeout)
}

// redisCalls is how often Redis has run each command so far, INFO itself
// excluded: read before and after a run, it says which Redis commands a
// request costs, and how many.
func redisCalls(addr string) (map[string]uint64, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil {
		return nil, fmt.Errorf("INFO commandstats: unexpected reply %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return parseCommandStats(string(body))
}

// parseCommandStats reads the calls of INFO commandstats's lines,
// "cmdstat_evalsha:calls=12,usec=…", by command, leaving out INFO's own.
func parseCommandStats(info string) (map[string]uint64, error) {
	calls := map[string]uint64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		if name == "cmdstat_info" {
			continue
		}
		num, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls, nil
}

// scriptCommands run a server-side script: one round trip however many
// commands the script runs (which commandstats counts too, under their
// own names).
var scriptCommands = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// perRequest turns two readings of redisCalls into figures per request:
// all commands (those scripts ran included), script calls, and the
// commands by name, most frequent first.
func perRequest(before, after map[string]uint64, requests int) (total, scripts float64, top string) {
	type cmd struct {
		name string
		n    uint64
	}
	var cmds []cmd
	var sum, scriptCalls uint64
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			cmds = append(cmds, cmd{name, d})
			sum += d
			if scriptCommands[name] {
				scriptCalls += d
			}
		}
	}
	if requests == 0 {
		return math.NaN(), math.NaN(), ""
	}
	slices.SortFunc(cmds, func(a, b cmd) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.name, b.name)) })
	parts := make([]string, len(cmds))
	for i, c := range cmds {
		parts[i] = fmt.Sprintf("%s %.2f", c.name, float64(c.n)/float64(requests))
	}
	return float64(sum) / float64(requests), float64(scriptCalls) / float64(requests), strings.Join(parts, ", ")
}

// postgres is a PostgreSQL data directory made for the run and how to
// start a server on it.
type postgres struct {
	bin  string // the directory of initdb and postgres
	data string
	cred *syscall.Credential // the postgres user, when the harness runs as root
}

// initPostgres makes a data directory in dir with trust authentication
// for the user bench (it is reached on loopback only, by the run's own
// gatehouse). PostgreSQL refuses to run as root: as root, the cluster
// belongs to the postgres user.
func initPostgres(dir string) (*postgres, error) {
	bin, err := findPostgres()
	if err != nil {
		return nil, err
	}
	pg := &postgres{bin: bin, data: filepath.Join(dir, "pgdata")}
	if err := os.Mkdir(pg.data, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("the redis target runs PostgreSQL, which refuses to run as root, and there is no postgres user to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The postgres user must reach its directory inside the run's.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
		if err := os.Chown(pg.data, uid, gid); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", pg.data, "-U", "bench", "-A", "trust", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return pg, nil
}

// findPostgres finds the directory holding initdb and postgres: on PATH,
// else where Debian and PGDG install them.
func findPostgres() (string, error) {
	dirs := []string{}
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for v := 18; v >= 14; v-- {
		dirs = append(dirs, fmt.Sprintf("/usr/lib/postgresql/%d/bin", v), fmt.Sprintf("/usr/pgsql-%d/bin", v))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("the redis target runs gatehouse in cluster mode, which needs PostgreSQL too: no initdb and postgres found (Debian/Ubuntu: apt-get install postgresql), or leave redis out of -targets")
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// start runs a server on the data directory, listening on loopback only,
// and returns its URL for storage.postgres and its postmaster.
func (pg *postgres) start(ctx context.Context, g *proc.Group, name string, o proc.Options) (string, *proc.Proc, error) {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return "", nil, err
	}
	_, port, _ := net.SplitHostPort(ports[0])
	o.Credential = pg.cred
	p, err := g.StartWith(name, o, filepath.Join(pg.bin, "postgres"), "-D", pg.data, "-p", port,
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=")
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitLog(ctx, "database system is ready to accept connections", readyTimeout); err != nil {
		return "", nil, err
	}
	// The -base binary's database: an older gatehouse refuses a schema
	// that a newer one has migrated past. The data directory outlives
	// one layout's server, so the second finds it there already.
	host, _, _ := net.SplitHostPort(ports[0])
	if out, err := exec.CommandContext(ctx, pg.tool("createdb"), "-h", host, "-p", port, "-U", "bench", baseDatabase).CombinedOutput(); err != nil && !strings.Contains(string(out), "already exists") {
		return "", nil, fmt.Errorf("createdb %s: %w: %s", baseDatabase, err, strings.TrimSpace(string(out)))
	}
	return "postgres://bench@" + ports[0] + "/postgres?sslmode=disable", p, nil
}

// tool is the path of one of PostgreSQL's client programs: beside the
// server's initdb, where a link on PATH to initdb leads, or else on PATH.
func (pg *postgres) tool(name string) string {
	if initdb, err := filepath.EvalSymlinks(filepath.Join(pg.bin, "initdb")); err == nil {
		if p := filepath.Join(filepath.Dir(initdb), name); isExec(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return filepath.Join(pg.bin, name) // fails with the path it tried
}

// baseDatabase is the database of the targets the -base binary serves
// (base-full needs none): each binary migrates a schema of its own.
const baseDatabase = "base"

// spilledMetric counts the usage records gatehouse's sink spilled to
// disk.
const spilledMetric = "gatehouse_usage_records_spilled_total"

// scrapeCounter reads one unlabelled counter from a Prometheus text
// exposition at url.
func scrapeCounter(url, name string) (float64, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return parseCounter(string(body), name)
}

// parseCounter finds "name value" in a text exposition.
func parseCounter(exposition, name string) (float64, error) {
	for line := range strings.SplitSeq(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in the metrics", name)
}
