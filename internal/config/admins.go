package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// Admin roles: what a holder of an admin key may do through /admin/ and
// the dashboard.
const (
	RoleAdmin  = "admin"  // read and change everything
	RoleViewer = "viewer" // read only: every change is refused with 403
)

func adminRoles() []string { return []string{RoleAdmin, RoleViewer} }

// AdminKey is one named admin credential of admin_keys, beside the single
// admin_key (which is the role admin, named "admin"). Names identify who
// made a change in the audit log, so they must be unique.
type AdminKey struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`  // secret: the bearer token of /admin and the dashboard's login
	Role string `yaml:"role"` // admin | viewer; required
}

// DefaultAdminName names the single admin_key in the audit log.
const DefaultAdminName = "admin"

// HasAdmin says whether any admin key is configured, so /admin/ and the
// dashboard are served.
func (c *Config) HasAdmin() bool { return c.AdminKey != "" || len(c.AdminKeys) > 0 }

// AllAdminKeys lists every admin credential: admin_key first (as
// DefaultAdminName, role admin), then admin_keys.
func (c *Config) AllAdminKeys() []AdminKey {
	out := make([]AdminKey, 0, len(c.AdminKeys)+1)
	if c.AdminKey != "" {
		out = append(out, AdminKey{Name: DefaultAdminName, Key: c.AdminKey, Role: RoleAdmin})
	}
	return append(out, c.AdminKeys...)
}

// adminKeys checks admin_keys: each named, unique, with a known role and
// a key that neither repeats another admin key nor a client key (the same
// secret would then mean two things).
func (c *checker) adminKeys(cfg *Config) {
	names := map[string]string{}
	if cfg.AdminKey != "" {
		names[DefaultAdminName] = "admin_key"
	}
	clientKeys := map[string]bool{}
	for _, k := range cfg.Keys {
		clientKeys[k.Key] = true
	}
	if cfg.AdminKey != "" && clientKeys[cfg.AdminKey] {
		c.errorf("admin_key", "is also a client key in keys[]; use different secrets")
	}
	secrets := map[string]string{}
	if cfg.AdminKey != "" {
		secrets[cfg.AdminKey] = "admin_key"
	}
	for i, a := range cfg.AdminKeys {
		path := fmt.Sprintf("admin_keys[%d]", i)
		switch {
		case a.Name == "":
			c.errorf(path+".name", "is required (it names who made a change in the audit log)")
		case a.Name == DefaultAdminName && cfg.AdminKey != "":
			c.errorf(path+".name", "%q is the name of admin_key; choose another", a.Name)
		default:
			c.unique(names, a.Name, path+".name", "admin key name")
		}
		switch {
		case a.Key == "":
			c.errorf(path+".key", "is required")
		case a.Key != strings.TrimSpace(a.Key):
			c.errorf(path+".key", "has leading or trailing whitespace or a line break")
		case clientKeys[a.Key]:
			c.errorf(path+".key", "is also a client key in keys[]; use different secrets")
		default:
			// Never quote the key: it is a secret.
			if first, dup := secrets[a.Key]; dup {
				c.errorf(path+".key", "duplicate key: the same value as %s", first)
			} else {
				secrets[a.Key] = path + ".key"
			}
		}
		if a.Role == "" {
			c.errorf(path+".role", "is required; want one of %s", oneOf(adminRoles()))
		}
		c.enum(path+".role", a.Role, adminRoles(), "role")
	}
}

func (a AdminKey) redacted() AdminKey {
	a.Key = mask(a.Key)
	return a
}

// String prints a with its key redacted.
func (a AdminKey) String() string {
	return fmt.Sprintf("{Name:%s Key:%s Role:%s}", a.Name, mask(a.Key), a.Role)
}

// GoString prints a for %#v, redacted.
func (a AdminKey) GoString() string { return "config.AdminKey" + a.String() }

// LogValue logs a, redacted.
func (a AdminKey) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", a.Name), slog.String("role", a.Role), slog.String("key", mask(a.Key)))
}
