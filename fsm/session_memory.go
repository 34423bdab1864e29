package fsm

// addLock records that the session holds or waits for lock name, making
// its lock set on the first.
func (s *SessionRecord) addLock(name string) {
	if s.Locks == nil {
		s.Locks = make(map[string]struct{}, 1)
	}
	s.Locks[name] = struct{}{}
}
