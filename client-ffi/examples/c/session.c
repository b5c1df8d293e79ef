/*
 * A whole gatehouse session from C, through the client library's C ABI (docs/client.md).
 *
 *   session <address> <certificate file> <token key> <player id>
 *
 * Connects, then answers every event as a game must: streams what it is told (a short sleep
 * stands in for the engine's level streaming), reports it streamed, keeps count of what it
 * sees, restarts after each death. Once it has seen its own join end, two transitions end, a
 * restart bring it back and a pawn possessed after that, it leaves. Exits 0 only if it saw
 * each of those and the session then closed cleanly; 1 otherwise (or after 60 s).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gatehouse_client.h"

static double seconds_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* Reads a whole file; NULL if it cannot. */
static unsigned char *read_file(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return NULL;
    }
    unsigned char *bytes = NULL;
    if (fseek(file, 0, SEEK_END) == 0) {
        long size = ftell(file);
        if (size > 0 && fseek(file, 0, SEEK_SET) == 0) {
            bytes = malloc((size_t)size);
            if (bytes != NULL && fread(bytes, 1, (size_t)size, file) != (size_t)size) {
                free(bytes);
                bytes = NULL;
            }
            *len = (size_t)size;
        }
    }
    fclose(file);
    return bytes;
}

/* What the session showed us. */
struct seen {
    int welcomed;
    int joins_ended;
    int transitions_ended;
    int deaths;
    int restarted;
    int possessed_after_restart;
    int closed_cleanly;
};

static int seen_everything(const struct seen *seen) {
    return seen->welcomed && seen->joins_ended >= 1 && seen->transitions_ended >= 2 &&
           seen->deaths >= 1 && seen->restarted >= 1 && seen->possessed_after_restart >= 1;
}

/* The game's answer to one event. */
static void handle(GhClient *client, const GhEvent *event, struct seen *seen) {
    switch (event->kind) {
    case GH_EVENT_WELCOMED:
        printf("welcomed as %s\n", event->player);
        seen->welcomed = 1;
        break;
    case GH_EVENT_REJECTED:
        printf("login refused (reason %u): %s\n", event->code, event->text);
        break;
    case GH_EVENT_SHOW_LOADING_SCREEN:
        printf("loading screen up\n");
        break;
    case GH_EVENT_STREAM_LEVELS:
        printf("streaming %zu levels and %zu rooms of %s\n", event->names_len, event->rooms_len,
               event->node);
        sleep_ms(20);
        /* A newer load may have replaced it meanwhile: then this is refused, harmlessly. */
        gh_client_levels_streamed(client, event->load);
        break;
    case GH_EVENT_POSSESSED:
        printf("possessed pawn %llu\n", (unsigned long long)event->pawn);
        if (seen->restarted > 0) {
            seen->possessed_after_restart++;
        }
        break;
    case GH_EVENT_HIDE_LOADING_SCREEN:
        if (event->load.kind == GH_LOAD_JOIN) {
            seen->joins_ended++;
        } else {
            seen->transitions_ended++;
        }
        printf("loading screen down (%s %llu)\n",
               event->load.kind == GH_LOAD_JOIN ? "join" : "transition",
               (unsigned long long)event->load.id);
        break;
    case GH_EVENT_DIED:
        printf("died; restarting\n");
        seen->deaths++;
        if (gh_client_request_restart(client) != GH_OK) {
            printf("the restart was refused\n");
        }
        break;
    case GH_EVENT_REVIVED:
        if (event->flag) {
            seen->restarted++;
        }
        break;
    case GH_EVENT_TRAVELLING:
        /* The screen stays up; the library logs in at the other server by itself. */
        printf("travelling to %s on %s\n", event->node, event->text);
        break;
    case GH_EVENT_SERVER_CHANGED:
        /* Drop every object of the world you knew: the new server's world follows. */
        printf("now playing on another server, as %s\n", event->player);
        break;
    case GH_EVENT_TRAVEL_ABANDONED:
        printf("move given up (why %u, %u): %s\n", event->code, event->value,
               event->text != NULL ? event->text : "");
        break;
    case GH_EVENT_CLOSED:
        printf("closed (kind %d, code %u): %s\n", (int)event->close, event->code,
               event->text != NULL ? event->text : "");
        seen->closed_cleanly = (event->close == GH_CLOSE_SERVER && event->code == 0) ||
                               event->close == GH_CLOSE_LEFT;
        break;
    default:
        break;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s <address> <certificate file> <token key> <player id>\n",
                argv[0]);
        return 2;
    }
    size_t certificate_len = 0;
    unsigned char *certificate = read_file(argv[2], &certificate_len);
    if (certificate == NULL) {
        fprintf(stderr, "cannot read the certificate %s\n", argv[2]);
        return 1;
    }
    char token[1024];
    int64_t token_len = gh_dev_mint_token(argv[3], argv[4], 3600, token, sizeof token);
    if (token_len < 0 || (size_t)token_len >= sizeof token) {
        fprintf(stderr, "cannot mint a token for %s\n", argv[4]);
        free(certificate);
        return 1;
    }
    GhConnectOptions options = {
        .address = argv[1],
        .server_name = "localhost",
        .certificate = certificate,
        .certificate_len = certificate_len,
        .token = token,
        .connect_timeout_ms = 0,
    };
    char error[256];
    GhClient *client = gh_client_connect(&options, error, sizeof error);
    free(certificate);
    if (client == NULL) {
        fprintf(stderr, "cannot connect: %s\n", error);
        return 1;
    }

    struct seen seen;
    memset(&seen, 0, sizeof seen);
    int left = 0;
    double give_up = seconds_now() + 60.0;
    for (;;) {
        GhEvent event;
        int got = gh_client_poll_event(client, &event);
        if (got < 0) {
            break; /* closed, and every event taken */
        }
        if (got == 0) {
            if (seconds_now() > give_up) {
                fprintf(stderr, "gave up after 60 s\n");
                break;
            }
            sleep_ms(1); /* a game renders a frame here */
            continue;
        }
        handle(client, &event, &seen);
        if (!left && seen_everything(&seen)) {
            printf("saw a join, two transitions and a restart: leaving\n");
            gh_client_leave(client);
            left = 1;
        }
    }
    gh_client_free(client);
    if (seen_everything(&seen) && seen.closed_cleanly) {
        printf("ok\n");
        return 0;
    }
    fprintf(stderr,
            "missing: welcomed %d, joins %d, transitions %d, deaths %d, restarts %d, "
            "possessed after restart %d, closed cleanly %d\n",
            seen.welcomed, seen.joins_ended, seen.transitions_ended, seen.deaths, seen.restarted,
            seen.possessed_after_restart, seen.closed_cleanly);
    return 1;
}
