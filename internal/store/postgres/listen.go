package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"herd/internal/store"
)

var _ store.Listener = (*Store)(nil)

// Listen holds one of the Store's MaxConns connections, LISTENing on
// store.ChannelEvents, store.ChannelCommands and store.ChannelPlacements, and calls fn for each
// notification until ctx is done or the connection fails. The connection
// is closed after (a LISTENing session is not handed back to the pool).
func (s *Store) Listen(ctx context.Context, fn func(channel, payload string)) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		sc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres: listen: unexpected driver connection %T", driverConn)
		}
		c := sc.Conn()
		// Whatever ends the loop, the session must not go back to the pool
		// still listening.
		defer c.Close(context.WithoutCancel(ctx))
		for _, ch := range []string{store.ChannelEvents, store.ChannelCommands, store.ChannelPlacements} {
			if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return fmt.Errorf("postgres: listen %s: %w", ch, err)
			}
		}
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("postgres: listen: %w", err)
			}
			fn(n.Channel, n.Payload)
		}
	})
}
