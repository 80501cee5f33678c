"""The Sphinx site around the tutorials: the hooks ``conf.py`` connects, one job a module (``teardown``,
``build_plan``, ``generated``, ``rerun``, ``banners``, ``pages``), the generated page sections
(``landing``, ``deploy_page``, ``runner_page``), which tutorials a build executes (``selection``) and
sharded builds (``shards``).

May import: every other layer (it is the top one); nothing imports it.
"""
