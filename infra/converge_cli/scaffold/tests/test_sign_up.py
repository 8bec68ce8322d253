"""The example producer on the local cloud: the sign-up function writes a user and its greeting's job atomically."""

from __future__ import annotations

from converge import OperationState


def test_a_sign_up_writes_the_user_and_enqueues_its_greeting_once(converge_cloud) -> None:
    # Given the project deployed, its sign-up function among its functions
    # When a user signs up, the client retries the same sign-up, and the cloud runs until quiet
    first = converge_cloud.invoke("SignUpFunction", {"user_id": "u-9"})
    again = converge_cloud.invoke("SignUpFunction", {"user_id": "u-9"})
    converge_cloud.run_until_quiet()
    # Then the user's row was written once, by the first sign-up only
    assert (first["created"], again["created"]) == (True, False)
    assert converge_cloud.effects.items("UsersTable") == 1
    assert converge_cloud.effects.writes("UsersTable") == 1
    # And the greeting it enqueued in the same transaction ran once: one object in the project's bucket
    greeting = converge_cloud.operation("greet-u-9")
    assert (greeting.state, greeting.attempts) == (OperationState.SUCCEEDED, 1)
    assert converge_cloud.effects.of("greet-u-9") == {"GreetingsBucket": 1}
