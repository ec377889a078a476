# jupyterhub_config.py: jupyter-ci for everyone on this Hub (see docs/hub.md).
# The provider keys stay in the Hub's environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...):
# configure() passes them to the jupyter-ci service only, never to users' servers.
from jupyter_ci.hub import configure

c = get_config()  # noqa: F821

# JupyterHub's own: who may log in (here every user of this machine, by their password),
# and who sees everyone's spending (the Hub's admins), e.g. {"ada"}.
c.Authenticator.allow_all = True
# c.Authenticator.admin_users = {"ada"}

configure(
    c,
    policy={
        # Everyone: two small models, 2 million tokens a day, $20 a month.
        "default": {
            "models": ["openai:gpt-5-mini", "anthropic:claude-haiku-4-5"],
            "model": "openai:gpt-5-mini",
            "tokens_per_day": 2_000_000,
            "usd_per_month": 20,
        },
        "groups": {
            # Members of the Hub group "research" may use any model, up to $200 a month.
            "research": {"models": ["openai:*", "anthropic:*"], "usd_per_month": 200},
            # "students": every step of an ask waits for approval, sessions run boxed.
            "students": {"approval_minimum": "each", "boxed": True, "usd_per_day": 1},
        },
    },
)
