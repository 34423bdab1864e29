package fsm

// LockCount returns how many locks are stored: held, waited for or in
// lock-delay (the free histories are not counted).
func (f *FSM) LockCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.locks)
}
