"""Result tables, rankings and figures."""
