package testservers

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
)

func redisClient(t *testing.T, r *Redis) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr()}, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRedisRestart: a persistent server keeps its data over a stop and a
// kill, on the same port; one without persistence comes back empty; and
// while stopped, nothing answers on the port.
func TestRedisRestart(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		persist bool
		stop    func(*Redis) error
	}{
		{"persist stop", true, (*Redis).Stop},
		{"persist kill", true, (*Redis).Kill},
		{"no persistence", false, (*Redis).Stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := StartRedis(t, RedisOptions{Persist: tc.persist})
			c := redisClient(t, r)
			if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := tc.stop(r); err != nil {
				t.Fatal(err)
			}
			if err := ping(r.Addr()); err == nil {
				t.Fatal("a stopped Redis answers PING")
			}
			if err := r.Start(); err != nil {
				t.Fatal(err)
			}
			// The client's connection died with the server: the first
			// command after it may fail while the client reconnects.
			var got string
			var err error
			for range 50 {
				got, err = c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
				if err == nil || rueidis.IsRedisNil(err) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			switch {
			case tc.persist && (err != nil || got != "v"):
				t.Fatalf("after a restart: %q, %v; want the value kept", got, err)
			case !tc.persist && !rueidis.IsRedisNil(err):
				t.Fatalf("after a restart without persistence: %q, %v; want nothing", got, err)
			}
		})
	}
}

// TestPostgresRestart: committed rows survive a clean stop and a crash,
// and connections fail while the server is down.
func TestPostgresRestart(t *testing.T) {
	p := StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec := func(sql string) error {
		c, err := pgx.Connect(ctx, p.DSN())
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE TABLE t (v int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	for i, stop := range []func() error{p.Stop, p.Kill} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if err := exec(`SELECT 1`); err == nil {
			t.Fatal("a stopped PostgreSQL answers")
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := exec(`INSERT INTO t VALUES (2)`); err != nil {
			t.Fatalf("after restart %d: %v", i, err)
		}
	}
	c, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows after a stop and a crash: %d, %v; want 3", n, err)
	}
}
