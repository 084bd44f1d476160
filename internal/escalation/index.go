package escalation

import (
	"slices"
	"time"

	"herd"
	"herd/internal/store"
)

// quiet is the tick of an idle host, decided without the store: no stored
// episode (the index, known empty) and no condition holding on any of
// listed. It keeps the clear sightings as a full tick would, and builds
// nothing per session.
func (e *Escalator) quiet(listed []herd.Session, now time.Time) bool {
	for _, s := range listed {
		if s.Host != e.host {
			continue
		}
		for _, r := range Rules {
			if Observe(s, r).Active {
				return false
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.indexOK || len(e.index) > 0 {
		return false
	}
	for _, s := range listed {
		if s.Host != e.host {
			continue
		}
		for _, r := range Rules {
			if c := Observe(s, r); !c.Exact {
				e.clearSeen[clearKey{s.Name, r}] = now
			}
		}
	}
	// What was not seen clear now belongs to a session gone.
	for key, at := range e.clearSeen {
		if !at.Equal(now) {
			delete(e.clearSeen, key)
		}
	}
	clear(e.fired) // no episode is stored, so none is open
	return true
}

// forgetIndex makes the next tick read the index again: a write of it is
// under way.
func (e *Escalator) forgetIndex() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.indexOK = false
	e.indexGen++
}

// decodeEpisode parses a stored episode; a garbled row is logged and read
// as no episode.
func (e *Escalator) decodeEpisode(key, raw string, ok bool) Episode {
	if !ok {
		return Episode{}
	}
	ep, err := Decode(raw)
	if err != nil {
		e.log.Error("escalation: unreadable episode; starting over", "key", key, "err", err)
		return Episode{}
	}
	return ep
}

// escalationIndex reads this host's index of stored episode keys; a
// garbled index is logged and rebuilt from what the rules see.
func (e *Escalator) escalationIndex(tx store.Tx) ([]string, error) {
	keys, _, err := e.readIndex(tx)
	return keys, err
}

// readIndex is escalationIndex also reporting whether the index was read
// whole (false when it was garbled: stored episodes may be missing from
// it).
func (e *Escalator) readIndex(tx store.Tx) (keys []string, whole bool, err error) {
	raw, _, err := tx.KV(IndexKey(e.host))
	if err != nil {
		return nil, false, err
	}
	keys, err = DecodeIndex(raw)
	if err != nil {
		e.log.Error("escalation: unreadable index; rebuilding", "err", err)
		return nil, false, nil
	}
	slices.Sort(keys)
	return slices.Compact(keys), true, nil
}

func addKey(keys []string, key string) []string {
	i, found := slices.BinarySearch(keys, key)
	if found {
		return keys
	}
	return slices.Insert(keys, i, key)
}

func removeKey(keys []string, key string) []string {
	i, found := slices.BinarySearch(keys, key)
	if !found {
		return keys
	}
	return slices.Delete(keys, i, i+1)
}
