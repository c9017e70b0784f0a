package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/cache"
)

// Cache is the exact cache's lower tier in cluster mode: every replica
// reads and writes the same entries. An entry is a string key holding
// cache.Encode's (deflated) bytes with a TTL; each project's entries
// share a hash tag with the project's index, a sorted set of its keys by
// expiry, so one script can purge a project even on Redis Cluster. The
// set of projects with entries, for purging them all, is a plain set.
type Cache struct {
	c      rueidis.Client
	prefix string
	now    func() time.Time
}

// NewCache returns the tier on c, its keys under prefix (default "gh:").
func NewCache(c rueidis.Client, prefix string) *Cache {
	if prefix == "" {
		prefix = "gh:"
	}
	return &Cache{c: c, prefix: prefix, now: time.Now}
}

// entryKey and indexKey share the project's hash tag.
func (c *Cache) entryKey(project string, k cache.Key) string {
	return c.prefix + "cache:{" + projectTag(project) + "}:" + string(k)
}

func (c *Cache) indexKey(project string) string {
	return c.prefix + "cache:{" + projectTag(project) + "}:index"
}

// projectTag is project as its keys' hash tag. Redis Cluster hashes the
// text between a key's first '{' and the next '}', or the whole key when
// that text is empty: a project that is empty (a static key may have
// none) or starts with '}' would scatter its entries and index over
// slots, so it is written as '~' and its hex, as is one starting with
// '~', which keeps the mapping one to one. Other names are kept as they
// are, so entries written before stay found.
func projectTag(project string) string {
	if project == "" || project[0] == '}' || project[0] == '~' {
		return "~" + hex.EncodeToString([]byte(project))
	}
	return project
}

func (c *Cache) projectsKey() string { return c.prefix + "cache:projects" }

// purgeChannel carries the name of each purged project ("" for all) to
// every replica, so none keeps serving purged entries from its memory.
func (c *Cache) purgeChannel() string { return c.prefix + "cache:purged" }

// putScript stores an entry with its TTL, indexes it by expiry, drops the
// index's expired members and keeps the index alive as long as its
// longest-lived entry.
var putScript = rueidis.NewLuaScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', KEYS[2], last[2]) end
return 1`)

// purgeScript deletes a project's entries and index; it returns how many
// entries were still there.
var purgeScript = rueidis.NewLuaScript(`
local keys = redis.call('ZRANGE', KEYS[1], 0, -1)
local n = 0
for i = 1, #keys, 500 do
  n = n + redis.call('DEL', unpack(keys, i, math.min(i + 499, #keys)))
end
redis.call('DEL', KEYS[1])
return n`)

// GetEntry implements cache.Store.
func (c *Cache) GetEntry(ctx context.Context, project string, k cache.Key) (*cache.Entry, error) {
	b, err := c.c.Do(ctx, c.c.B().Get().Key(c.entryKey(project, k)).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis: cache get: %w", err)
	}
	e, err := cache.Decode(b)
	if err != nil {
		return nil, nil // another format: a miss, replaced by the next answer
	}
	return e, nil
}

// PutEntry implements cache.Store. An entry already expired is not
// written.
func (c *Cache) PutEntry(ctx context.Context, k cache.Key, e *cache.Entry) error {
	now := c.now()
	ttl := e.Expires.Sub(now).Milliseconds()
	if ttl <= 0 {
		return nil
	}
	value, err := cache.Encode(e)
	if err != nil {
		return fmt.Errorf("redis: cache put: %w", err)
	}
	entry, index := c.entryKey(e.Project, k), c.indexKey(e.Project)
	if err := putScript.Exec(ctx, c.c, []string{entry, index}, []string{string(value), strconv.FormatInt(ttl, 10),
		strconv.FormatInt(e.Expires.UnixMilli(), 10), strconv.FormatInt(now.UnixMilli(), 10)}).Error(); err != nil {
		return fmt.Errorf("redis: cache put: %w", err)
	}
	if err := c.c.Do(ctx, c.c.B().Sadd().Key(c.projectsKey()).Member(e.Project).Build()).Error(); err != nil {
		return fmt.Errorf("redis: cache put: %w", err)
	}
	return nil
}

// PurgeEntries implements cache.Store: project's entries, or every
// project's.
func (c *Cache) PurgeEntries(ctx context.Context, project string) (int, error) {
	projects := []string{project}
	if project == "" {
		var err error
		if projects, err = c.c.Do(ctx, c.c.B().Smembers().Key(c.projectsKey()).Build()).AsStrSlice(); err != nil {
			return 0, fmt.Errorf("redis: cache purge: %w", err)
		}
	}
	total := 0
	for _, p := range projects {
		n, err := purgeScript.Exec(ctx, c.c, []string{c.indexKey(p)}, nil).AsInt64()
		if err != nil {
			return total, fmt.Errorf("redis: cache purge: %w", err)
		}
		total += int(n)
		if err := c.c.Do(ctx, c.c.B().Srem().Key(c.projectsKey()).Member(p).Build()).Error(); err != nil {
			return total, fmt.Errorf("redis: cache purge: %w", err)
		}
	}
	if err := c.c.Do(ctx, c.c.B().Publish().Channel(c.purgeChannel()).Message(project).Build()).Error(); err != nil {
		return total, fmt.Errorf("redis: cache purge: tell the replicas: %w", err)
	}
	return total, nil
}

// Purges implements cache.Invalidator: it calls purged with each project
// purged through any replica ("" for all) until ctx ends, subscribing
// again after a lost connection.
func (c *Cache) Purges(ctx context.Context, purged func(project string)) {
	for ctx.Err() == nil {
		_ = c.c.Receive(ctx, c.c.B().Subscribe().Channel(c.purgeChannel()).Build(), func(m rueidis.PubSubMessage) {
			purged(m.Message)
		})
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

var (
	_ cache.Store       = (*Cache)(nil)
	_ cache.Invalidator = (*Cache)(nil)
)
