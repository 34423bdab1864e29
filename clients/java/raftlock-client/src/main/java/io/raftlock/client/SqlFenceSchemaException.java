package io.raftlock.client;

import java.sql.SQLException;

/**
 * The fence table of a {@link SqlFence} does not exist, or lacks the columns
 * or the primary key (lock_name, slot) of {@link SqlFence#schema()}. Nothing
 * was admitted; the caller rolls back.
 */
public class SqlFenceSchemaException extends SQLException {
    private static final long serialVersionUID = 1L;

    /** With a message naming the table and what is wrong with it. */
    public SqlFenceSchemaException(String message) {
        super(message);
    }

    /** With a message, and the database's error that showed it. */
    public SqlFenceSchemaException(String message, Throwable cause) {
        super(message, cause);
    }
}
