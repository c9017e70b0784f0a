package main

import (
	"log/slog"

	"gatehouse/docs"
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
	if !cfg.UI.On() || cfg.AdminKey == "" || !ok {
		return nil, nil
	}
	return ui.New(ui.Options{
		Sessions: sessions,
		AdminKey: auth.HashKey(cfg.AdminKey),
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
	case cfg.AdminKey == "":
		return "The dashboard needs admin_key in the config: it logs in with the admin key."
	default:
		return "The dashboard needs a store for its sessions (SQLite or PostgreSQL)."
	}
}
