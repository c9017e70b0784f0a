package main

import (
	"log/slog"

	"gatehouse/docs"
	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/config"
	"gatehouse/internal/ui"
	"gatehouse/web"
)

// dashboard builds the dashboard of one config generation: nil when the
// config turns it off or it cannot work (no admin key to log in with, no
// store for its sessions); dashboardOff then says which.
func (s *stores) dashboard(cfg *config.Config, log *slog.Logger) (*ui.Handler, error) {
	sessions, ok := s.store.(auth.SessionStore)
	if !cfg.UI.On() || !cfg.HasAdmin() || !ok {
		return nil, nil
	}
	auditLog, _ := s.store.(audit.Store)
	return ui.New(ui.Options{
		Audit:    auditLog,
		Sessions: sessions,
		Admins:   adminCredentials(cfg),
		TTL:      cfg.UI.SessionTTL.D(),
		Assets:   web.Dist(),
		OpenAPI:  docs.OpenAPI(),
		Log:      log,
	})
}

// dashboardOff is why /ui/ answers 404, in words an operator can act on.
func dashboardOff(cfg *config.Config, s *stores) string {
	switch {
	case !cfg.UI.On():
		return "The dashboard is turned off (ui.enabled: false in the config)."
	case !cfg.HasAdmin():
		return "The dashboard needs admin_key in the config: it logs in with the admin key."
	default:
		return "The dashboard needs a store for its sessions (SQLite or PostgreSQL)."
	}
}

// adminCredentials are the config's admin keys, admin_key first, by the
// hashes of their keys: the admin API and the dashboard keep no key.
func adminCredentials(cfg *config.Config) auth.Admins {
	all := cfg.AllAdminKeys()
	out := make(auth.Admins, len(all))
	for i, a := range all {
		out[i] = auth.Admin{Name: a.Name, Role: auth.Role(a.Role), Hash: auth.HashKey(a.Key)}
	}
	return out
}
