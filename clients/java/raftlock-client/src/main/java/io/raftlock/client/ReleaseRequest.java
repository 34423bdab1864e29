package io.raftlock.client;

/**
 * Who asked a grant's holder to release it (docs/API.md, "Release
 * requests"): the asking session's public handle and name, its holder id,
 * and when (the leader's RFC 3339 time). Never a session id. The holder
 * chooses whether and when to release.
 *
 * @param bySessionHandle the asking session's handle
 * @param bySessionName the asking session's name
 * @param byHolder the asker's holder id
 * @param at when it asked, as the leader wrote it
 */
public record ReleaseRequest(String bySessionHandle, String bySessionName, String byHolder, String at) {
}
