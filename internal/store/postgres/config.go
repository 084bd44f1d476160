package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// OpenConfig is Open with a parsed configuration (a benchmark sets a
// query tracer on it to count round trips).
func OpenConfig(ctx context.Context, cfg *pgx.ConnConfig) (*Store, error) {
	if cfg == nil {
		return nil, errors.New("postgres: open: nil config")
	}
	return openConfig(ctx, cfg)
}
