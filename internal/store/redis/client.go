package redis

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// The schemes of the deployments that have more than one address.
const (
	schemeCluster  = "redis+cluster"
	schemeSentinel = "redis+sentinel"
)

// sentinelRefresh is how often the Sentinel client asks the Sentinels
// who the master is, besides listening for their +switch-master events: a
// missed event would otherwise leave it writing to a demoted master until
// restarted.
const sentinelRefresh = 5 * time.Second

// NewClient connects to the Redis that url names, as the Limiter and the
// exact cache want it: no client-side caching (a replica must see the
// others' writes at once). It fails when no server can be reached. The
// forms:
//
//	redis://[user:pass@]host:port[/db]    one server (rediss:// over TLS, unix:///path.sock)
//	redis+cluster://[user:pass@]host:port,host:port…[/]
//	                                      a Redis Cluster, found from any of its nodes
//	redis+sentinel://[user:pass@]host:port,host:port…/master
//	                                      the master the Sentinels know by that name
//
// The client follows a cluster's MOVED and ASK redirections and a
// Sentinel failover by itself. A redis+cluster:// URL that reaches a
// server not in cluster mode is refused, not quietly used as one server.
// (rueidis also finds a cluster behind a redis:// URL naming one node.)
func NewClient(url string) (rueidis.Client, error) {
	opt, mode, err := clientOption(url)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Client-side caching (CLIENT TRACKING) serves DoCache, which
	// gatehouse does not call.
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil && mode == rueidis.ClientModeCluster && strings.Contains(err.Error(), "cluster support disabled") {
		return nil, errNotCluster
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if mode == rueidis.ClientModeCluster && c.Mode() != rueidis.ClientModeCluster {
		c.Close()
		return nil, errNotCluster
	}
	return c, nil
}

var errNotCluster = errors.New("redis: a redis+cluster:// URL names a server that is not in cluster mode; use redis:// for a single server")

// clientOption turns url into rueidis's options and the kind of
// deployment it names. The one-server forms are rueidis's own.
func clientOption(url string) (rueidis.ClientOption, rueidis.ClientMode, error) {
	scheme, rest, _ := strings.Cut(url, "://")
	if scheme != schemeCluster && scheme != schemeSentinel {
		opt, err := rueidis.ParseURL(url)
		return opt, rueidis.ClientModeStandalone, err
	}
	u, err := splitURL(rest)
	if err != nil {
		return rueidis.ClientOption{}, "", fmt.Errorf("%s:// URL: %w", scheme, err)
	}
	opt := rueidis.ClientOption{InitAddress: u.addrs, Username: u.user, Password: u.password}
	if scheme == schemeCluster {
		if u.path != "" && u.path != "0" {
			return rueidis.ClientOption{}, "", errors.New("redis+cluster:// URL: a cluster has database 0 only; end the URL after its addresses")
		}
		return opt, rueidis.ClientModeCluster, nil
	}
	if u.path == "" || strings.Contains(u.path, "/") {
		return rueidis.ClientOption{}, "", errors.New("redis+sentinel:// URL: end it with /<master name>, the name the Sentinels monitor")
	}
	opt.Sentinel = rueidis.SentinelOption{MasterSet: u.path, TopologyRefreshInterval: sentinelRefresh}
	return opt, rueidis.ClientModeSentinel, nil
}

// multiURL is a URL with several host:port addresses, taken apart by hand:
// Go's url.Parse rejects a list of IPv6 literals ("[::1]:7001,[::1]:7002").
type multiURL struct {
	user, password string
	addrs          []string
	path           string // after the '/' that ends the addresses
}

// splitURL reads what follows "scheme://": [user[:pass]@]host:port,… then
// an optional /path. It takes no query: every setting it would carry is
// the gateway's to choose.
func splitURL(rest string) (multiURL, error) {
	var u multiURL
	authority, path, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(authority, "?#") || strings.ContainsAny(path, "?#") {
		return u, errors.New("takes no query parameters or fragment")
	}
	u.path = path
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		info, err := url.Parse("redis://" + authority[:at] + "@x")
		if err != nil || info.User == nil {
			return u, errors.New("user or password is not valid URL text (percent-encode reserved characters)")
		}
		u.user = info.User.Username()
		u.password, _ = info.User.Password()
		authority = authority[at+1:]
	}
	for _, a := range strings.Split(authority, ",") {
		if err := checkHostPort(a); err != nil {
			return u, err
		}
		u.addrs = append(u.addrs, a)
	}
	return u, nil
}

// checkHostPort accepts host:port with a port from 1 to 65535; the error
// does not quote a (it may be a mistyped password).
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || strings.ContainsAny(host, "@/,?# \t") || perr != nil || n < 1 || n > 65535 {
		return errors.New("every address must be host:port, with a port from 1 to 65535, separated by commas")
	}
	return nil
}
