package sqltx

import (
	"fmt"
	"strings"

	"herd"
)

var placementCols = []string{"role", "idx", "host", "assigned_at"}

var (
	placementSelect = "SELECT " + strings.Join(placementCols, ", ") + ", generation FROM placements"
	// placementUpsert gives the slot the generation PutPlacement chose.
	placementUpsert = "INSERT INTO placements (" + strings.Join(placementCols, ", ") + ", generation) VALUES (" +
		placeholders(len(placementCols)+1) + ") ON CONFLICT (role, idx) DO UPDATE SET host = excluded.host, " +
		"assigned_at = excluded.assigned_at, generation = excluded.generation"
)

// Placements lists every placement by role and index.
func (t *tx) Placements() ([]herd.Placement, error) {
	return collect(t, "placements", scanPlacement, placementSelect+" ORDER BY role, idx")
}

// PlacementsOnHost lists the placements on host by role and index.
func (t *tx) PlacementsOnHost(host string) ([]herd.Placement, error) {
	return collect(t, "placements on "+host, scanPlacement, placementSelect+" WHERE host = ? ORDER BY role, idx", host)
}

func scanPlacement(sc scanner) (herd.Placement, error) {
	var (
		p        herd.Placement
		assigned int64
	)
	if err := sc.Scan(&p.Role, &p.Index, &p.Host, &assigned, &p.Generation); err != nil {
		return p, err
	}
	p.AssignedAt = fromNanos(assigned)
	return p, nil
}

// Placement returns the placement of role's slot index, or an error
// wrapping store.ErrNotFound.
func (t *tx) Placement(role string, index int) (herd.Placement, error) {
	p, err := scanPlacement(t.queryRow(placementSelect+" WHERE role = ? AND idx = ?", role, index))
	if err != nil {
		return herd.Placement{}, t.notFound(err, "placement", fmt.Sprintf("%s/%d", role, index))
	}
	return p, nil
}

// PutPlacement inserts or replaces the placement of p.Role's slot p.Index
// with a generation, its fencing token, above every placement's now
// (p.Generation is ignored): a put never repeats a token that a slot
// placed now holds, and a slot's token only grows.
func (t *tx) PutPlacement(p herd.Placement) error {
	if p.Role == "" || p.Host == "" || p.Index < 0 {
		return fmt.Errorf("%s: put placement: role, host and an index >= 0 are required, got %+v", t.name, p)
	}
	assigned, err := nanos(p.AssignedAt)
	if err != nil {
		return fmt.Errorf("%s: put placement %s/%d: assigned_at: %w", t.name, p.Role, p.Index, err)
	}
	var top int64
	if err := t.queryRow("SELECT COALESCE(MAX(generation), 0) FROM placements").Scan(&top); err != nil {
		return fmt.Errorf("%s: put placement %s/%d: generation: %w", t.name, p.Role, p.Index, err)
	}
	if _, err := t.exec(placementUpsert, p.Role, p.Index, p.Host, assigned, top+1); err != nil {
		return fmt.Errorf("%s: put placement %s/%d: %w", t.name, p.Role, p.Index, err)
	}
	if err := t.notifyPlacement(p.Host); err != nil {
		return fmt.Errorf("%s: put placement %s/%d: %w", t.name, p.Role, p.Index, err)
	}
	return nil
}

// DeletePlacement forgets the placement of role's slot index.
func (t *tx) DeletePlacement(role string, index int) error {
	if _, err := t.exec("DELETE FROM placements WHERE role = ? AND idx = ?", role, index); err != nil {
		return fmt.Errorf("%s: delete placement %s/%d: %w", t.name, role, index, err)
	}
	return nil
}
