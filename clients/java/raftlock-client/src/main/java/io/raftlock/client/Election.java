package io.raftlock.client;

import java.time.Duration;
import java.util.function.Consumer;

/**
 * An election on one lock name: {@link #campaign} blocks until this session
 * leads (campaigners are elected in the order they began, FIFO),
 * {@link #resign()} hands over at once, {@link #observe} reports every leader
 * in order.
 */
public final class Election {
    private final Session session;
    private final String name;
    private volatile Grant leadership;

    Election(Session session, String name) {
        this.session = session;
        this.name = name;
    }

    /** The election's name. */
    public String name() {
        return name;
    }

    /**
     * Campaigns with {@code value} (published to observers) and blocks until
     * elected, or until {@code wait} runs out (null: as long as it takes; then
     * RaftlockException {@code wait_timeout}). Act as leader while the
     * returned grant's {@link Grant#lost()} is not complete.
     */
    public Grant campaign(String value, Duration wait) throws InterruptedException {
        Grant g = new Grant(session, name, Mode.EXCLUSIVE, value);
        g.acquire(wait, true);
        leadership = g;
        return g;
    }

    /** Campaigns for as long as it takes. */
    public Grant campaign(String value) throws InterruptedException {
        return campaign(value, null);
    }

    /** Gives the leadership up, if this Election holds it. */
    public void resign() {
        Grant g = leadership;
        leadership = null;
        if (g != null) {
            g.resign();
        }
    }

    /**
     * Reports the election's leaders to {@code listener}: the current one (if
     * any), then every leader elected after it, in grant order, each once
     * (from the lock's grant history). Close the Watch to stop.
     */
    public Watch observe(Consumer<Leader> listener) {
        return Watch.leaders(session.t, name, Duration.ofSeconds(10), listener);
    }
}
