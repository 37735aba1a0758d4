"""Delta Lake change data feed → Delta."""
