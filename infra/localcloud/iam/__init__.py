"""The local cloud's IAM check: each function's AWS calls are authorised against its role, as on AWS.

check.py       AccessCheck: the running function, the botocore handler, denials as AWS answers them
actions.py     the IAM actions and resource ARNs each API call needs (the Service Authorization Reference)
roles.py       each function's role and the policies attached to it, resolved against the stack
evaluation.py  identity-based policy evaluation (Deny, Allow, NotAction/NotResource, conditions)
"""

from .actions import Need, UnmappedApiCall, register
from .check import AccessCheck, Denial, outside_functions
from .roles import Role, function_roles

__all__ = [
    "AccessCheck",
    "Denial",
    "Need",
    "Role",
    "UnmappedApiCall",
    "function_roles",
    "outside_functions",
    "register",
]
