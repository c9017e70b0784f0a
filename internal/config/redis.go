package config

import (
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// storage.redis names one of three kinds of Redis deployment:
//
//	redis://[user:pass@]host:port[/db]   one server (rediss:// over TLS, unix:///path.sock)
//	redis+cluster://[user:pass@]host:port,host:port…[/]
//	                                     a Redis Cluster, found from any of its nodes
//	redis+sentinel://[user:pass@]host:port,host:port…/master
//	                                     the master the Sentinels know by that name
//
// or is a YAML list of cluster nodes' host:port, which the decoder turns
// into the redis+cluster:// URL. internal/store/redis reads the same
// forms; its tests hold the two to the same grammar.
const (
	redisClusterScheme  = "redis+cluster"
	redisSentinelScheme = "redis+sentinel"
)

const redisForms = "must be a redis://, rediss://, unix://, redis+cluster:// or redis+sentinel:// URL, or a list of cluster nodes' host:port"

// redis decodes storage.redis: a string, or a list of seed addresses.
func (d *decoder) redis(path string, n ast.Node, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		s, ok := scalarText(n)
		if !ok {
			d.fail(path, n, "expected a URL or a list of host:port, got %s", kindName(n))
			return
		}
		v.SetString(s)
		return
	}
	if len(seq.Values) == 0 {
		d.fail(path, n, "an empty list names no cluster node; give the host:port of one or more")
		return
	}
	seeds := make([]string, 0, len(seq.Values))
	for i, item := range seq.Values {
		ip := path + "[" + strconv.Itoa(i) + "]"
		d.at[ip] = d.position(item)
		r := d.resolve(item)
		s, ok := d.seedText(r)
		switch {
		case r == nil || !ok:
			d.fail(ip, item, "expected host:port, got %s", kindName(r))
		case !validHostPort(s):
			d.fail(ip, item, "must be host:port with a port from 1 to 65535, such as 10.0.0.5:6379; for a password, use a redis+cluster:// URL")
		default:
			seeds = append(seeds, s)
			continue
		}
		d.bad[path] = true
	}
	v.SetString(redisClusterScheme + "://" + strings.Join(seeds, ","))
}

// seedText is the text of a list item. In a flow list, [a:7000], the
// YAML parser reads an unquoted host:port as a mapping of one entry,
// a: 7000, which is put back together.
func (d *decoder) seedText(n ast.Node) (string, bool) {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) == 1 {
		n = m.Values[0]
	}
	mv, ok := n.(*ast.MappingValueNode)
	if !ok {
		return scalarText(n)
	}
	host, ok := scalarText(d.resolve(mv.Key))
	if !ok {
		return "", false
	}
	port, ok := scalarText(d.resolve(mv.Value))
	return host + ":" + port, ok
}

// validHostPort accepts host:port with a port from 1 to 65535 and a host
// free of what would end it inside a URL (a seed list is joined into one).
func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	return err == nil && host != "" && !strings.ContainsAny(host, "@/,?# \t") && perr == nil && n >= 1 && n <= 65535
}

// redisProblem says what is wrong with a storage.redis URL, or "". It
// never quotes the URL, which may hold a password.
func redisProblem(s string) string {
	scheme, rest, _ := strings.Cut(s, "://")
	switch scheme {
	case "redis", "rediss", "unix":
		if _, err := url.Parse(s); err != nil {
			return "is not a valid URL"
		}
		return ""
	case redisClusterScheme, redisSentinelScheme:
	default:
		return redisForms
	}
	userinfo, hosts, path, ok := splitMultiHost(rest)
	switch {
	case !ok:
		return "takes no query parameters or fragment: " + redisForms
	case userinfo != "" && parseUserinfo(userinfo) == nil:
		return "has a user or password that is not valid URL text (percent-encode reserved characters)"
	}
	for _, h := range strings.Split(hosts, ",") {
		if !validHostPort(h) {
			return "must list its nodes as host:port with a port from 1 to 65535, separated by commas"
		}
	}
	if scheme == redisClusterScheme && path != "" && path != "0" {
		return "names a database: a Redis Cluster has database 0 only"
	}
	if scheme == redisSentinelScheme && (path == "" || strings.Contains(path, "/")) {
		return "must end with /<master name>, the name the Sentinels monitor"
	}
	return ""
}

// splitMultiHost cuts what follows "scheme://" in a URL of several hosts
// (which Go's url.Parse cannot read when they are IPv6 literals) into
// its userinfo, host list and path; ok is false when it has a query or
// fragment.
func splitMultiHost(rest string) (userinfo, hosts, path string, ok bool) {
	authority, path, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(authority, "?#") || strings.ContainsAny(path, "?#") {
		return "", "", "", false
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		return authority[:at], authority[at+1:], path, true
	}
	return "", authority, path, true
}

// parseUserinfo decodes a URL's user[:password], or returns nil.
func parseUserinfo(s string) *url.Userinfo {
	u, err := url.Parse("redis://" + s + "@h")
	if err != nil {
		return nil
	}
	return u.User
}

// multiHostUserinfo cuts a redis+cluster:// or redis+sentinel:// URL
// around its userinfo, for redaction where url.Parse fails: head is the
// text up to it, tail the text after its '@'.
func multiHostUserinfo(s string) (head, userinfo, tail string, ok bool) {
	scheme, rest, _ := strings.Cut(s, "://")
	if scheme != redisClusterScheme && scheme != redisSentinelScheme {
		return "", "", "", false
	}
	authority, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return "", "", "", false
	}
	return scheme + "://", authority[:at], rest[at+1:], true
}
