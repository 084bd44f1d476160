package tasks

import (
	"context"
	"errors"
	"maps"
	"slices"

	"herd"
	"herd/internal/store"
)

// world is what a round read: the tasks not ended of this host's task
// roles, the roles, and their sessions.
type world struct {
	tasks []herd.Task
	// gone are the task roles of this host's last round that no longer
	// exist, with their tasks not ended.
	gone     []herd.Task
	roles    map[string]herd.Role
	sessions map[string]herd.Session
	incs     map[string]herd.Incarnation
	// queued counts the queued tasks read per role (at most what its
	// free replicas or its max_replicas can take).
	queued map[string]int
}

// local reports whether this daemon runs role r's tasks: those of a role
// it declares, or of a placed role (every host runs the tasks its own
// replicas hold, and gives queued ones to its free replicas: the store
// lets one host have each).
func (m *Manager) local(r herd.Role) bool {
	return r.Tasks && (r.Placed() || r.Host == "" || r.Host == m.host)
}

func (m *Manager) read(ctx context.Context) (world, error) {
	w := world{roles: map[string]herd.Role{}, sessions: map[string]herd.Session{}, incs: map[string]herd.Incarnation{}}
	var holding []herd.TaskState
	for _, s := range herd.TaskStates {
		if s.Holds() {
			holding = append(holding, s)
		}
	}
	err := m.st.View(ctx, func(tx store.Tx) error {
		w.tasks, w.roles, w.sessions, w.incs = nil, map[string]herd.Role{}, map[string]herd.Session{}, map[string]herd.Incarnation{}
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		for _, r := range roles {
			if m.local(r) {
				w.roles[r.Name] = r
			}
		}
		if err := m.goneRoles(tx, roles, &w); err != nil {
			return err
		}
		if len(w.roles) == 0 {
			return nil
		}
		all, err := tx.Tasks(store.TaskFilter{States: holding})
		if err != nil {
			return err
		}
		held := map[string]bool{}
		for _, t := range all {
			if _, ok := w.roles[t.Role]; ok {
				w.tasks = append(w.tasks, t)
				held[t.Session] = true
			}
		}
		sessions, err := tx.SessionsOnHost(m.host)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			if _, ok := w.roles[s.Role]; !ok || s.Archived {
				continue
			}
			w.sessions[s.Name] = s
			// The conversation of a replica that holds a task (a crash
			// relaunch that resumed it goes on).
			if held[s.Name] && s.Incarnation != "" && s.State.Live() {
				inc, err := tx.Incarnation(s.Incarnation)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				w.incs[s.Name] = inc
			}
		}
		// A task held by another host's replica (a placed role) is that
		// host's to carry; one whose replica is gone from the fleet is
		// anyone's to put before a person (the write lets one do it).
		mine := w.tasks[:0]
		for _, t := range w.tasks {
			if _, ok := w.sessions[t.Session]; !ok {
				s, err := tx.Session(t.Session)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err == nil && s.Host != m.host {
					delete(held, t.Session)
					continue
				}
			}
			mine = append(mine, t)
		}
		w.tasks = mine
		free := map[string]int{}
		for name, s := range w.sessions {
			if !held[name] && w.replica(name).Ready() { // as Assign sees it
				free[s.Role]++
			}
		}
		// Of the queued tasks, as many as a role's free replicas can take
		// now, or as its max_replicas may start replicas for.
		w.queued = map[string]int{}
		for _, name := range slices.Sorted(maps.Keys(w.roles)) {
			limit := max(free[name], w.roles[name].MaxReplicas)
			if limit == 0 {
				continue
			}
			queued, err := tx.Tasks(store.TaskFilter{Role: name, States: []herd.TaskState{herd.TaskQueued}, Limit: limit})
			if err != nil {
				return err
			}
			w.tasks = append(w.tasks, queued...)
			w.queued[name] = len(queued)
		}
		return nil
	})
	return w, err
}

// goneRoles finds the tasks of the task roles this daemon ran at its
// last round that no longer exist (deleted): they end, failed, their
// branches kept.
func (m *Manager) goneRoles(tx store.Tx, roles []herd.Role, w *world) error {
	exists := map[string]bool{}
	for _, r := range roles {
		exists[r.Name] = true
	}
	m.mu.Lock()
	last := m.taskRoles
	m.taskRoles = map[string]bool{}
	for name := range w.roles {
		m.taskRoles[name] = true
	}
	m.mu.Unlock()
	if last == nil {
		// The first round: roles deleted while no daemon ran.
		var live []herd.TaskState
		for _, s := range herd.TaskStates {
			if !s.Ended() {
				live = append(live, s)
			}
		}
		ts, err := tx.Tasks(store.TaskFilter{States: live})
		if err != nil {
			return err
		}
		for _, t := range ts {
			if !exists[t.Role] {
				w.gone = append(w.gone, t)
			}
		}
		return nil
	}
	for name := range last {
		if exists[name] {
			continue
		}
		ts, err := tx.Tasks(store.TaskFilter{Role: name})
		if err != nil {
			return err
		}
		for _, t := range ts {
			if !t.State.Ended() {
				w.gone = append(w.gone, t)
			}
		}
	}
	return nil
}
